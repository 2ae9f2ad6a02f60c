# An image is imported by its id or its name.
terraform import vmaas_image.example example
