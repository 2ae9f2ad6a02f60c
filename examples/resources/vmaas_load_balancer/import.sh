# A load balancer is imported by its id or its name.
terraform import vmaas_load_balancer.example example
