//! Which addresses warden's own requests may reach: not loopback, private, link-local (cloud
//! metadata), CGNAT, multicast or reserved ranges, in IPv4 and in every IPv6 form that embeds
//! an IPv4 address. `web_fetch`'s resolver and the egress proxy's connects both ask here.

use std::net::{IpAddr, Ipv4Addr};

/// Why an address may not be fetched, or `None` when it is public.
pub fn forbidden_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let seg = v6.segments();
            if v6.is_loopback() {
                Some("loopback")
            } else if v6.is_unspecified() {
                Some("unspecified")
            } else if seg[0] & 0xfe00 == 0xfc00 {
                Some("private (unique local)")
            } else if seg[0] & 0xffc0 == 0xfe80 {
                Some("link-local")
            } else if seg[0] & 0xff00 == 0xff00 {
                Some("multicast")
            } else if seg[0] == 0x64 && seg[1] == 0xff9b {
                // NAT64 embeds an IPv4 address in the last 32 bits.
                forbidden_v4(embedded_v4(seg[6], seg[7]))
            } else if seg[0] == 0x2002 {
                // 6to4 embeds an IPv4 address in bits 16-48.
                forbidden_v4(embedded_v4(seg[1], seg[2]))
            } else if seg[0] == 0
                && seg[1] == 0
                && seg[2] == 0
                && seg[3] == 0
                && seg[4] == 0
                && seg[5] == 0
            {
                // IPv4-compatible (deprecated) ::a.b.c.d
                Some("IPv4-compatible IPv6")
            } else if seg[0] == 0x2001 && seg[1] == 0x0db8 {
                Some("documentation range")
            } else {
                None
            }
        }
    }
}

/// The IPv4 address two IPv6 segments carry, high segment first.
fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local (cloud metadata lives here)")
    } else if ip.is_unspecified() || o[0] == 0 {
        Some("unspecified")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("carrier-grade NAT")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_broadcast() || o[0] >= 240 {
        Some("reserved")
    } else if (o[0] == 192 && o[1] == 0 && (o[2] == 0 || o[2] == 2))
        || (o[0] == 198 && (o[1] == 18 || o[1] == 19 || (o[1] == 51 && o[2] == 100)))
        || (o[0] == 203 && o[1] == 0 && o[2] == 113)
    {
        Some("special-purpose")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_metadata_addresses_are_forbidden() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(forbidden_reason(ip).is_some(), "{ip} should be forbidden");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(
                forbidden_reason(ip.parse().unwrap()).is_none(),
                "{ip} is public"
            );
        }
    }
}
