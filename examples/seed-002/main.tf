# Seed 002's three VMs through vmaas's API, on the kubevirt backend: the
# templates of templates.yaml (publish them first with
# `vmaas template sync examples/seed-002/`), and the Windows guests on the
# VLAN 2003 subnet. On qemu the subnet's network reaches the VLAN through an
# uplink (docs/network.md); on KubeVirt the subnet is the VM's primary
# network, and a second bridged NIC is what the claims' physicalNetwork
# gives (docs/backends.md).
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

resource "vmaas_virtual_network" "vlan2003" {
  name      = "vlan2003"
  ipv4_cidr = "10.203.0.0/16"
}

resource "vmaas_subnet" "vlan2003" {
  name            = "vlan2003"
  virtual_network = vmaas_virtual_network.vlan2003.id
  ipv4_cidr       = "10.203.0.0/24"
}

resource "vmaas_virtual_machine" "rhel9" {
  name     = "example-rhel9"
  template = "rhel9-server-small"
}

resource "vmaas_virtual_machine" "windows10" {
  name     = "example-windows10"
  template = "windows10-desktop"
  network_attachment {
    subnet = vmaas_subnet.vlan2003.id
  }
}

resource "vmaas_virtual_machine" "server2019" {
  name     = "example-server2019"
  template = "server2019"
  network_attachment {
    subnet = vmaas_subnet.vlan2003.id
  }
}

output "ids" {
  value = join(",", [vmaas_virtual_machine.rhel9.id, vmaas_virtual_machine.windows10.id, vmaas_virtual_machine.server2019.id])
}
