# A virtual network is imported by its id or its name.
terraform import vmaas_virtual_network.example example
