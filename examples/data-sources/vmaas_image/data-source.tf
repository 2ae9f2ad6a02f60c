data "vmaas_image" "example" {
  name = "example"
}

output "id" {
  value = data.vmaas_image.example.id
}
