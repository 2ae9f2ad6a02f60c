# `tofu test` (or `terraform test`, 1.6 and later): a VM configured by
# cloud-init comes up READY with an address.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   tofu test

variables {
  ssh_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly tenant@example"
}

run "configured" {
  command = apply

  assert {
    condition     = output.status == "READY"
    error_message = "the VM is ${output.status}, not READY"
  }

  assert {
    condition     = contains(vmaas_virtual_machine.vm.ssh_keys, var.ssh_key)
    error_message = "the VM carries the tenant's key"
  }
}
