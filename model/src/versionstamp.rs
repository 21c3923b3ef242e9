//! Versionstamps: 10 bytes, an 8-byte big-endian commit counter and two zero bytes,
//! shown as 20 lowercase hex characters. stampkv's counter is the engine's commit
//! sequence number: strictly increasing, shared by everything one commit writes, and never
//! reused, across restarts and crashes included.

use std::fmt;
use std::str::FromStr;

/// A commit's versionstamp.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Versionstamp(pub [u8; 10]);

impl Versionstamp {
    /// The versionstamp of engine commit `seq`.
    pub fn from_sequence(seq: u64) -> Self {
        let mut bytes = [0u8; 10];
        bytes[..8].copy_from_slice(&seq.to_be_bytes());
        Versionstamp(bytes)
    }

    /// The commit counter (the engine's sequence number).
    pub fn sequence(&self) -> u64 {
        let mut counter = [0u8; 8];
        counter.copy_from_slice(&self.0[..8]);
        u64::from_be_bytes(counter)
    }

    /// The 20 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A string that is not 20 hex characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidVersionstamp;

impl fmt::Display for InvalidVersionstamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Invalid check")
    }
}

impl std::error::Error for InvalidVersionstamp {}

impl FromStr for Versionstamp {
    type Err = InvalidVersionstamp;

    /// Parses 20 hex characters, case-insensitively (as Deno parses check versionstamps).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bytes = text.as_bytes();
        if bytes.len() != 20 {
            return Err(InvalidVersionstamp);
        }
        let mut out = [0u8; 10];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let digit = |c: u8| (c as char).to_digit(16).ok_or(InvalidVersionstamp);
            let &[high, low] = pair else { return Err(InvalidVersionstamp) };
            *slot = (digit(high)? * 16 + digit(low)?) as u8;
        }
        Ok(Versionstamp(out))
    }
}

impl fmt::Display for Versionstamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Versionstamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Versionstamp({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versionstamps_are_big_endian_counters_in_lowercase_hex() {
        let v = Versionstamp::from_sequence(0x27);
        assert_eq!(v.to_hex(), "00000000000000270000");
        assert_eq!(v.sequence(), 0x27);
        assert!(Versionstamp::from_sequence(255) < Versionstamp::from_sequence(256));
        assert_eq!("000000000000002A0000".parse::<Versionstamp>(), Ok(Versionstamp::from_sequence(42)));
        for bad in [
            "",
            "0000000000000000000",
            "000000000000000000000",
            "00000000000000000g00",
            "+0000000000000000000",
        ] {
            assert_eq!(bad.parse::<Versionstamp>(), Err(InvalidVersionstamp), "{bad:?}");
        }
    }
}
