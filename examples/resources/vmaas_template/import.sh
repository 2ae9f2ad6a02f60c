# A template is imported by its id.
terraform import vmaas_template.example example
