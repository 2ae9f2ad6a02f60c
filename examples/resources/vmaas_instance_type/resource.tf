# Administrators publish instance types; VMs name them.
resource "vmaas_instance_type" "example" {
  name        = "example.small"
  cores       = 2
  memory_gib  = 4
  description = "Two cores, 4 GiB."
}
