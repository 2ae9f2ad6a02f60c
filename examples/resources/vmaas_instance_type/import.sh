# An instance type is imported by its id or its name.
terraform import vmaas_instance_type.example example.small
