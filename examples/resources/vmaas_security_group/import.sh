# A security group is imported by its id or its name.
terraform import vmaas_security_group.example example
