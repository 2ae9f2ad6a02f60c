# A snapshot is imported by its id or its name.
terraform import vmaas_snapshot.example example
