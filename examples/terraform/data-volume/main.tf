# A VM with a data volume that outlives it: replace the VM
# (terraform apply -replace=vmaas_virtual_machine.app) and the new one gets
# the same volume, data intact. With the debian template
# (-var template=debian), the user data mounts the volume (found by its
# serial) on /srv/data, formatting it only the first time.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   terraform apply
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

variable "size" {
  type    = string
  default = "256Mi"
}

variable "boot_gib" {
  type    = number
  default = 1
}

resource "vmaas_volume" "data" {
  name = "app-data"
  size = var.size
}

resource "vmaas_virtual_machine" "app" {
  name     = "app"
  template = var.template
  user_data = <<-EOT
    #cloud-config
    runcmd:
      - |
        for _ in $(seq 60); do
          dev=$(grep -l '^${substr(replace(vmaas_volume.data.id, "-", ""), 0, 20)}$' /sys/block/vd*/serial | cut -d/ -f4)
          [ -n "$dev" ] && break; sleep 1
        done
        blkid /dev/$dev || mkfs.ext4 -q /dev/$dev
        mkdir -p /srv/data && mount /dev/$dev /srv/data
  EOT
  # The VM's own disks: its boot disk at a size of its own (growing it is
  # an in-place change the guest sees at its next start), and a scratch
  # disk beside it that goes with the VM.
  boot_disk {
    size_gib = var.boot_gib
  }
  additional_disk {
    size_gib = 1
  }
  timeouts {
    create = "10m"
  }
}

# The volume on the VM: a new VM gets a new attachment; the volume stays.
resource "vmaas_volume_attachment" "data" {
  name             = "app-data"
  volume           = vmaas_volume.data.id
  compute_instance = vmaas_virtual_machine.app.id
}

data "vmaas_volumes" "all" {
  depends_on = [vmaas_volume_attachment.data]
}

output "volume_id" {
  value = vmaas_volume.data.id
}

output "serial" {
  value = vmaas_volume_attachment.data.serial
}

output "vm_id" {
  value = vmaas_virtual_machine.app.id
}

output "volumes" {
  value = [for v in data.vmaas_volumes.all.volumes : "${v.name}:${v.state}"]
}
