data "vmaas_template" "example" {
  id = "tiny"
}

output "title" {
  value = data.vmaas_template.example.title
}
