use serde_json::json;

use super::*;

#[test]
fn a_template_reads_as_a_compute_instance_template() {
    let t = json!({"@type": "type.googleapis.com/fulfillment.v1.VirtualMachineTemplate", "id": "small", "title": "Small",
        "parameters": [{"name": "vm_cpu_cores", "default": {"value": 2}}],
        "spec_defaults": {"memory": "2Gi", "disk_size": "20Gi", "image": "debian-12", "instance_type": "general.small"}, "metadata": {"version": 3}});
    let v = to_compute_instance_template(t);
    assert_eq!(v["@type"], COMPUTE_INSTANCE_TEMPLATE_TYPE_URL);
    assert_eq!(v["metadata"], json!({"version": 3, "name": "small"}));
    assert_eq!(
        v["spec_defaults"],
        json!({"memory": "2Gi", "boot_disk": {"size_gib": 20}, "disk_image": {"id": "debian-12", "name": "debian-12"},
            "instance_type": {"name": "general.small"}})
    );
    assert_eq!(v["parameters"][0]["name"], "vm_cpu_cores");
    let odd = to_compute_instance_template(json!({"id": "x", "spec_defaults": {"disk_size": "1500Mi"}}));
    assert_eq!(odd["spec_defaults"]["boot_disk"]["size_gib"], 2, "sizes round up to whole GiB");
}

#[test]
fn a_compute_instance_template_body_reads_as_a_template_body() {
    let ci = json!({"metadata": {"name": "small", "tenant": "x", "version": 2}, "title": "Small",
        "spec_defaults": {"image": {"source_type": "image", "source_ref": "debian-12"}, "boot_disk": {"size_gib": 30}, "run_strategy": "Always", "cpu_cores": 2}});
    let t = from_compute_instance_template(ci, "object").unwrap();
    assert_eq!(
        t,
        json!({"id": "small", "title": "Small", "metadata": {"version": 2},
        "spec_defaults": {"image": "debian-12", "disk_size": "30Gi", "cpu_cores": 2}})
    );
    let typed =
        json!({"metadata": {"name": "small"}, "spec_defaults": {"disk_image": {"name": "debian-12"}, "instance_type": {"name": "m1"}}});
    let t = from_compute_instance_template(typed, "object").unwrap();
    assert_eq!(t["spec_defaults"], json!({"image": "debian-12", "instance_type": "m1"}));
}

#[test]
fn what_templates_cannot_say_is_named() {
    let ci = json!({"id": "a", "metadata": {"name": "b"}, "spec_defaults": {"image": {"source_type": "url", "source_ref": "http://x"},
        "boot_disk": {"size_gib": 0}, "run_strategy": "Halted", "instance_type": {"nmae": "m1"}, "is_windows": true}});
    let errs = from_compute_instance_template(ci, "object").unwrap_err();
    let fields: Vec<&str> = errs.0.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "object.metadata.name",
            "object.spec_defaults.image.source_type",
            "object.spec_defaults.boot_disk.size_gib",
            "object.spec_defaults.run_strategy",
            "object.spec_defaults.instance_type",
            "object.spec_defaults.is_windows",
        ]
    );
}
