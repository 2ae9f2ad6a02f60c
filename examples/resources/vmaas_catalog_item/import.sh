# A catalog item is imported by its id or its name.
terraform import vmaas_catalog_item.example ci-runner
