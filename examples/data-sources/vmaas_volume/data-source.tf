data "vmaas_volume" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_volume.example.id
}
