//! An imported image's lifecycle, as OSAC's `DiskImage` has it: AVAILABLE,
//! DEPRECATED (still booted, a replacement recommended), OBSOLETE (no new
//! VM boots it; VMs that do keep it). Its owner moves it (an
//! administrator, for a public image); the times are set as it moves.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::validation::ValidationErrors;

crate::wire_states! {
    /// Where an image is in its life.
    ImageLifecycle {
        /// New VMs boot it.
        Available = "DISK_IMAGE_LIFECYCLE_AVAILABLE",
        /// New VMs still boot it; moving to a replacement is recommended.
        Deprecated = "DISK_IMAGE_LIFECYCLE_DEPRECATED",
        /// No new VM boots it; it is still listed.
        Obsolete = "DISK_IMAGE_LIFECYCLE_OBSOLETE",
    }
}

impl ImageLifecycle {
    /// Whether it is [`ImageLifecycle::Available`] (left out of JSON).
    pub fn is_available(&self) -> bool {
        *self == Self::Available
    }
}

/// When an image was deprecated and made obsolete (or is to be).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ImageDeprecation {
    /// When it was deprecated (set on the move to DEPRECATED or OBSOLETE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation_timestamp: Option<DateTime<Utc>>,
    /// When it becomes or became obsolete: given by its owner, or set on the move to OBSOLETE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obsolescence_timestamp: Option<DateTime<Utc>>,
}

/// A change of an image's lifecycle (the `spec` of a PATCH).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ImageLifecyclePatch {
    /// Where it moves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<ImageLifecycle>,
    /// `obsolescence_timestamp` may be given (when a deprecated image will be obsolete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<ImageDeprecation>,
}

impl ImageLifecyclePatch {
    /// The lifecycle and deprecation an image has after this change, at
    /// `now`; a 400's fields under `prefix` (a deprecation time is the
    /// server's, and a planned obsolescence belongs to a deprecated image).
    pub fn applied(
        &self,
        now: DateTime<Utc>,
        current: (ImageLifecycle, Option<&ImageDeprecation>),
        prefix: &str,
    ) -> Result<(ImageLifecycle, Option<ImageDeprecation>), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let lifecycle = self.lifecycle.unwrap_or(current.0);
        let asked = self.deprecation.clone().unwrap_or_default();
        if asked.deprecation_timestamp.is_some() {
            errs.push(format!("{prefix}.deprecation.deprecation_timestamp"), "is set by the server when the image is deprecated");
        }
        if asked.obsolescence_timestamp.is_some() && lifecycle == ImageLifecycle::Available {
            errs.push(
                format!("{prefix}.deprecation.obsolescence_timestamp"),
                "needs lifecycle DISK_IMAGE_LIFECYCLE_DEPRECATED or _OBSOLETE",
            );
        }
        if let Some(Err(reason)) = asked.obsolescence_timestamp.as_ref().map(crate::validation::check_timestamp) {
            errs.push(format!("{prefix}.deprecation.obsolescence_timestamp"), reason);
        }
        let held = current.1.cloned().unwrap_or_default();
        let deprecation = match lifecycle {
            ImageLifecycle::Available => None,
            ImageLifecycle::Deprecated => Some(ImageDeprecation {
                deprecation_timestamp: held.deprecation_timestamp.or(Some(now)),
                obsolescence_timestamp: asked.obsolescence_timestamp.or(held.obsolescence_timestamp),
            }),
            ImageLifecycle::Obsolete => Some(ImageDeprecation {
                deprecation_timestamp: held.deprecation_timestamp.or(Some(now)),
                obsolescence_timestamp: asked
                    .obsolescence_timestamp
                    .or(held.obsolescence_timestamp.filter(|_| current.0 == ImageLifecycle::Obsolete))
                    .or(Some(now)),
            }),
        };
        errs.into_result((lifecycle, deprecation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn moving_sets_the_times_and_back_clears_them() {
        let (t1, t2, t3) = (at("2026-11-01T00:00:00Z"), at("2026-11-02T00:00:00Z"), at("2026-12-31T00:00:00Z"));
        let to = |l| ImageLifecyclePatch { lifecycle: Some(l), deprecation: None };
        let (l, d) = to(ImageLifecycle::Deprecated).applied(t1, (ImageLifecycle::Available, None), "object.spec").unwrap();
        assert_eq!((l, d.as_ref().unwrap().deprecation_timestamp), (ImageLifecycle::Deprecated, Some(t1)));
        let planned = ImageLifecyclePatch {
            lifecycle: None,
            deprecation: Some(ImageDeprecation { obsolescence_timestamp: Some(t3), ..Default::default() }),
        };
        let (_, d) = planned.applied(t2, (l, d.as_ref()), "object.spec").unwrap();
        assert_eq!(d.as_ref().unwrap().deprecation_timestamp, Some(t1), "kept");
        assert_eq!(d.as_ref().unwrap().obsolescence_timestamp, Some(t3), "planned");
        let (l, gone) = to(ImageLifecycle::Obsolete).applied(t2, (ImageLifecycle::Deprecated, d.as_ref()), "object.spec").unwrap();
        assert_eq!(
            (l, gone.as_ref().unwrap().obsolescence_timestamp),
            (ImageLifecycle::Obsolete, Some(t2)),
            "it became obsolete now, not when planned"
        );
        let (l, d) = to(ImageLifecycle::Available).applied(t3, (l, gone.as_ref()), "object.spec").unwrap();
        assert_eq!((l, d), (ImageLifecycle::Available, None));
    }

    #[test]
    fn what_is_the_servers_is_refused_naming_it() {
        let bad = ImageLifecyclePatch {
            lifecycle: Some(ImageLifecycle::Available),
            deprecation: Some(ImageDeprecation { deprecation_timestamp: Some(Utc::now()), obsolescence_timestamp: Some(Utc::now()) }),
        };
        let e = bad.applied(Utc::now(), (ImageLifecycle::Available, None), "object.spec").unwrap_err();
        let fields: Vec<&str> = e.0.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["object.spec.deprecation.deprecation_timestamp", "object.spec.deprecation.obsolescence_timestamp"]);
        assert_eq!(serde_json::to_value(ImageLifecycle::Obsolete).unwrap(), "DISK_IMAGE_LIFECYCLE_OBSOLETE");
    }
}
