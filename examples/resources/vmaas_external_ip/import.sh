# An external IP is imported by its id or its name.
terraform import vmaas_external_ip.example example
