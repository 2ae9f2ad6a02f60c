data "vmaas_volumes" "all" {}

output "names" {
  value = data.vmaas_volumes.all.volumes[*].name
}
