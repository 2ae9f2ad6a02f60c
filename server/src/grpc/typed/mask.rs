//! An update's field mask: which fields of the object sent change. Without
//! one, the fields set (not at their defaults) do, as in the REST API; with
//! one, exactly those it names (a message's name takes all its fields),
//! each checked against the message's descriptor.

use prost_reflect::MessageDescriptor;
use prost_types::FieldMask;

use crate::error::ApiError;

/// The fields an update changes.
pub struct Mask(Option<Vec<String>>);

impl Mask {
    /// No mask: the fields set change.
    pub fn none() -> Self {
        Self(None)
    }

    /// The mask of an update of `object` (its descriptor): a path naming no
    /// field is a 400 naming `update_mask`.
    pub fn of(mask: Option<FieldMask>, object: &MessageDescriptor) -> Result<Self, ApiError> {
        let paths = mask.map(|m| m.paths).filter(|p| !p.is_empty());
        if let Some(paths) = &paths {
            for path in paths {
                let steps: Vec<&str> = path.split('.').collect();
                super::super::wire::check_path(object.clone(), &steps)
                    .map_err(|reason| ApiError::field("update_mask", format!("{path}: {reason}")))?;
            }
        }
        Ok(Self(paths))
    }

    /// Whether the field at `path` (dotted) changes; `set`: the request
    /// sets it (what decides without a mask).
    pub fn wants(&self, path: &str, set: bool) -> bool {
        let Some(paths) = &self.0 else { return set };
        paths.iter().any(|p| p == path || path.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with('.')))
    }

    /// The paths named, comma-separated (OSAC's `update_mask` as a REST
    /// query writes it); none without a mask.
    pub fn joined(&self) -> Option<String> {
        self.0.as_ref().map(|p| p.join(","))
    }

    /// Whether the field at `path`, or a field inside it, changes.
    pub fn touches(&self, path: &str, set: bool) -> bool {
        let Some(paths) = &self.0 else { return set };
        self.wants(path, set) || paths.iter().any(|p| p.strip_prefix(path).is_some_and(|rest| rest.starts_with('.')))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> MessageDescriptor {
        let pool = prost_reflect::DescriptorPool::decode(crate::grpc::DESCRIPTORS).unwrap();
        pool.get_message_by_name("fulfillment.v1.VirtualMachine").unwrap()
    }

    #[test]
    fn without_a_mask_what_is_set_changes() {
        let m = Mask::of(None, &desc()).unwrap();
        assert!(m.wants("spec.state", true));
        assert!(!m.wants("spec.state", false));
    }

    #[test]
    fn a_mask_names_fields_and_messages() {
        let m = Mask::of(Some(FieldMask { paths: vec!["spec.state".into(), "metadata".into()] }), &desc()).unwrap();
        assert!(m.wants("spec.state", false));
        assert!(m.wants("metadata.name", false));
        assert!(!m.wants("spec.template", true));
        assert!(!m.wants("spec.stat", true));
        let inner = Mask::of(Some(FieldMask { paths: vec!["spec.template_parameters.cpu".into()] }), &desc()).unwrap();
        assert!(inner.touches("spec.template_parameters", false) && !inner.wants("spec.template_parameters", false));
        assert!(!inner.touches("spec.state", true));
    }

    #[test]
    fn a_path_naming_no_field_is_refused() {
        let e = Mask::of(Some(FieldMask { paths: vec!["spec.colour".into()] }), &desc()).err().unwrap();
        assert_eq!(e.details[0].field, "update_mask");
        assert!(e.details[0].reason.contains("colour"), "{e:?}");
    }
}
