//! Times between chrono and `google.protobuf.Timestamp`.

use chrono::{DateTime, Utc};
use prost_types::Timestamp;

/// `t` as a timestamp.
pub fn to_pb(t: DateTime<Utc>) -> Timestamp {
    Timestamp { seconds: t.timestamp(), nanos: i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0) }
}

/// The time `ts` names, unless it is out of range.
pub fn from_pb(ts: &Timestamp) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_keeps_its_nanoseconds() {
        let t = DateTime::parse_from_rfc3339("2026-11-30T03:04:05.123456789Z").unwrap().with_timezone(&Utc);
        assert_eq!(to_pb(t), Timestamp { seconds: t.timestamp(), nanos: 123_456_789 });
        assert_eq!(from_pb(&to_pb(t)), Some(t));
        assert_eq!(from_pb(&Timestamp { seconds: 0, nanos: -1 }), None);
    }
}
