//! Kubernetes' human-readable durations (`HumanDuration` of apimachinery), so that `spanset
//! status` prints ages as kubectl does.

/// Kubernetes' `HumanDuration`: the AGE cells.
pub fn human_duration(d: jiff::SignedDuration) -> String {
    let secs = d.as_secs();
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_follow_kubernetes_boundaries() {
        let cases = [
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (123, "2m3s"),
            (599, "9m59s"),
            (600, "10m"),
            (3 * 3600 - 1, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (53 * 3600, "2d5h"),
            (8 * 86400, "8d"),
            (730 * 86400, "2y"),
            (731 * 86400, "2y1d"),
            (3000 * 86400, "8y"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (123, "2m3s"),
            (599, "9m59s"),
            (600, "10m"),
            (10799, "179m"),
            (10800, "3h"),
            (11400, "3h10m"),
            (28799, "7h59m"),
            (28800, "8h"),
            (172799, "47h"),
            (172800, "2d"),
            (190800, "2d5h"),
            (691199, "7d23h"),
            (691200, "8d"),
            (63071999, "729d"),
            (63072000, "2y"),
            (66528000, "2y40d"),
            (252288000, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(jiff::SignedDuration::from_secs(secs)), want, "{secs}s");
        }
        assert_eq!(human_duration(jiff::SignedDuration::from_secs(-1)), "0s");
        assert_eq!(human_duration(jiff::SignedDuration::from_secs(-5)), "<invalid>");
    }
}
