# A volume is imported by its id or its name.
terraform import vmaas_volume.example example
