# A volume attachment is imported by its id or its name.
terraform import vmaas_volume_attachment.example example
