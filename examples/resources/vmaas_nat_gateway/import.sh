# A NAT gateway is imported by its id or its name.
terraform import vmaas_nat_gateway.example example
