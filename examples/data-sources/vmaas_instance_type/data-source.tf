data "vmaas_instance_type" "example" {
  name = "example.small"
}

output "cores" {
  value = data.vmaas_instance_type.example.cores
}
