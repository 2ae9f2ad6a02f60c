data "vmaas_images" "all" {}

output "names" {
  value = data.vmaas_images.all.images[*].name
}
