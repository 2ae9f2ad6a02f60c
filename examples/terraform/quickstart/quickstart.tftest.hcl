# `tofu test` (or `terraform test`, 1.6 and later): boots the quickstart VM
# against the server in VMAAS_ENDPOINT, stops it in place, then destroys it.
#   export VMAAS_ENDPOINT=http://127.0.0.1:8000 VMAAS_TOKEN=...
#   tofu test

variables {
  name = "quickstart-test"
}

run "boots" {
  command = apply

  assert {
    condition     = output.status == "READY"
    error_message = "the VM is ${output.status}, not READY"
  }

  assert {
    condition     = can(regex("^[0-9]+(\\.[0-9]+){3}$", output.external_ip))
    error_message = "the VM has no external IPv4 address: ${output.external_ip}"
  }
}

run "stops_in_place" {
  command = apply

  variables {
    state = "stopped"
  }

  assert {
    condition     = output.status == "STOPPED"
    error_message = "the VM is ${output.status}, not STOPPED"
  }
}
