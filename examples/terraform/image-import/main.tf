# Import an OS image from a URL, checked against its SHA-256, and boot a VM
# from it (template own-image). The apply waits for the import, then for
# the VM.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   terraform apply -var image_url=https://… -var image_sha256=…
terraform {
  required_providers {
    vmaas = {
      source = "vmaas/vmaas"
    }
  }
}

provider "vmaas" {}

variable "image_url" {
  type = string
}

variable "image_sha256" {
  type    = string
  default = null
}

resource "vmaas_image" "os" {
  name        = "my-os"
  source      = var.image_url
  sha256      = var.image_sha256
  description = "imported with Terraform"
}

resource "vmaas_virtual_machine" "vm" {
  name     = "from-my-os"
  template = "own-image"
  # OSAC's spec.image: the image it boots, in place of the template's.
  image = vmaas_image.os.name
  timeouts {
    create = "10m"
  }
}

output "image_format" {
  value = vmaas_image.os.format
}

output "image_state" {
  value = vmaas_image.os.state
}

output "status" {
  value = vmaas_virtual_machine.vm.status
}
