data "vmaas_catalog_item" "example" {
  name = "ci-runner"
}

output "template" {
  value = data.vmaas_catalog_item.example.template
}
