# A VM is imported by its id or its name.
terraform import vmaas_virtual_machine.example example
