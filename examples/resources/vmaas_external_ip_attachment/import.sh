# An external IP attachment is imported by its id or its name.
terraform import vmaas_external_ip_attachment.example example
