data "vmaas_templates" "all" {}

output "ids" {
  value = data.vmaas_templates.all.templates[*].id
}
