//! TFRecord framing, the container of TensorBoard's event files: per record, the payload's
//! length (u64, little-endian), the masked CRC32C of those 8 bytes, the payload, and the
//! payload's masked CRC32C.

/// CRC32C (Castagnoli), reflected polynomial.
const POLY: u32 = 0x82F6_3B78;

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

pub fn crc32c(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c = TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// TensorFlow's masked CRC: a CRC stored beside the data it covers is rotated and offset, so
/// that a CRC of data holding CRCs stays well distributed.
pub fn masked_crc(data: &[u8]) -> u32 {
    let c = crc32c(data);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One record around `payload`.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(payload.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(payload);
    out.extend_from_slice(&masked_crc(payload).to_le_bytes());
    out
}

/// The payloads of `bytes`, every CRC checked; an error names the record and what is wrong.
pub fn payloads(bytes: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let (payload, next) =
            record(bytes, at).map_err(|e| format!("record {}: {e}", out.len()))?;
        out.push(payload);
        at = next;
    }
    Ok(out)
}

/// The payloads of the records before the first damaged one (a file whose writer was killed
/// mid-record ends in one).
pub fn intact_payloads(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Ok((payload, next)) = record(bytes, at) {
        out.push(payload);
        at = next;
    }
    out
}

/// The record at `at`: its payload and where the next one starts.
fn record(bytes: &[u8], at: usize) -> Result<(&[u8], usize), &'static str> {
    let head = bytes.get(at..at + 12).ok_or("cut short in its header")?;
    let (len, crc) = head.split_at(8);
    if masked_crc(len) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("the length's CRC does not match");
    }
    let len = usize::try_from(u64::from_le_bytes(len.try_into().expect("8 bytes")))
        .map_err(|_| "a length beyond memory")?;
    let end = (at + 12).checked_add(len).and_then(|e| e.checked_add(4));
    let body = end
        .and_then(|end| bytes.get(at + 12..end))
        .ok_or("cut short")?;
    let (payload, crc) = body.split_at(len);
    if masked_crc(payload) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err("the payload's CRC does not match");
    }
    Ok((payload, at + 16 + len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_of_the_standard_check_string() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    #[test]
    fn frames_read_back_and_a_flipped_bit_is_found() {
        let mut bytes = frame(b"one");
        bytes.extend(frame(b""));
        bytes.extend(frame(b"three"));
        assert_eq!(payloads(&bytes).unwrap(), [&b"one"[..], b"", b"three"]);
        bytes[13] ^= 1;
        assert_eq!(
            payloads(&bytes).unwrap_err(),
            "record 0: the payload's CRC does not match"
        );
        assert!(payloads(&frame(b"x")[..10]).is_err());
        assert_eq!(intact_payloads(&bytes), Vec::<&[u8]>::new());
        let mut torn = frame(b"kept");
        torn.extend(&frame(b"lost")[..9]);
        assert_eq!(intact_payloads(&torn), [&b"kept"[..]]);
    }
}
