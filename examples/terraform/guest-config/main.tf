# A VM configured by cloud-init: the tenant's SSH key and user data.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   terraform apply -var "ssh_key=$(cat ~/.ssh/id_ed25519.pub)"
# With the debian template (-var template=debian), log in with
#   ssh debian@$(terraform output -raw external_ip)
terraform {
  required_providers {
    vmaas = {
      source = "vmaas/vmaas"
    }
  }
}

provider "vmaas" {}

variable "template" {
  type    = string
  default = "tiny"
}

variable "ssh_key" {
  type        = string
  description = "An SSH public key, e.g. the content of ~/.ssh/id_ed25519.pub."
}

variable "greeting" {
  type    = string
  default = "hello"
}

resource "vmaas_virtual_machine" "vm" {
  name     = "configured"
  template = var.template
  ssh_keys = [var.ssh_key]
  user_data = <<-EOT
    #cloud-config
    write_files:
      - path: /var/tmp/greeting
        content: "${var.greeting}\n"
  EOT
  timeouts {
    create = "10m"
  }
}

# The images VMs can boot from (for template_parameters = { vm_image = ... }).
data "vmaas_images" "all" {}

output "images" {
  value = [for i in data.vmaas_images.all.images : i.name if i.state == "READY"]
}

output "external_ip" {
  value = vmaas_virtual_machine.vm.external_ip
}

output "status" {
  value = vmaas_virtual_machine.vm.status
}
