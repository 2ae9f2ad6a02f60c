# A subnet is imported by its id or its name.
terraform import vmaas_subnet.example example
