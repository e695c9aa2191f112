//! Wall-clock timestamps as the audit log and the state stores write them.

/// The current time as RFC 3339 UTC with millisecond precision, e.g. `2026-11-22T14:30:00.123Z`.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let ms = now.millisecond();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    )
}
