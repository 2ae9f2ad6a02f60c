data "vmaas_volume_attachment" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_volume_attachment.example.id
}
