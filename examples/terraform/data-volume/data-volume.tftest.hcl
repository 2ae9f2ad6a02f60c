# `tofu test` (or `terraform test`, 1.6 and later): a VM with the data
# volume attached, then the VM replaced (a new name) and the same volume on
# the new one.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   tofu test

run "attached" {
  command = apply

  assert {
    condition     = vmaas_volume_attachment.data.serial == substr(replace(output.volume_id, "-", ""), 0, 20)
    error_message = "the attachment's serial is the volume's id, as the guest sees it: ${output.serial}"
  }

  assert {
    condition     = contains(output.volumes, "app-data:VOLUME_STATE_ATTACHED")
    error_message = "the volume is attached: ${jsonencode(output.volumes)}"
  }
}
