//! Static word-piece vectors distilled from all-MiniLM-L6-v2: the semantic half of the default
//! ranker, built into quiver, with no model to install and no network.
//!
//! Words alone cannot match a request to a tool that names the same thing differently ("the
//! price of Litecoin" → a tool for "cryptocurrencies"): on MetaTool's test part a quarter of the
//! requests share no content word with the tool they need. A sentence model knows such
//! relations, but running one costs a model directory and milliseconds per query. These vectors
//! keep part of what it knows at the cost of a table lookup: one vector per piece of the model's
//! vocabulary, fitted so that the sum of a sentence's pieces points where the model's own
//! vector of the sentence points, over 177 585 sentences that are no benchmark's (Debian's
//! package descriptions and WordNet's definitions), starting from each piece run through the
//! model alone (Model2Vec's and Tokenlearn's distillation; see `core/data/distilled/distill.py`,
//! which made the table, and its README). A text's vector is the sum of its pieces' vectors —
//! each already weighted down by how common the piece is, and stopwords not at all — so
//! embedding a request is a tokenisation and a few dozen row additions.
//!
//! Texts are split into pieces exactly as the model's own tokenizer does (BERT's: clean the
//! text, split CJK ideographs, strip accents, lowercase, split at whitespace and punctuation,
//! then greedy longest-match word pieces), which `tests/tests/select.rs` checks against Hugging
//! Face's `tokenizers` on the BFCL set's texts.
//!
//! ```
//! use quiver_core::select::distilled::{cosine, DistilledVectors};
//!
//! let vectors = DistilledVectors::get();
//! let request = vectors.embed("what is the price of Litecoin today");
//! let finance = vectors.embed("finance tool: stock quotes, cryptocurrencies and market news");
//! let weather = vectors.embed("weather tool: forecasts, rain and temperature for a city");
//! // No word in common with either; the model's knowledge still tells them apart.
//! assert!(cosine(&request, &finance) > cosine(&request, &weather) + 0.1);
//! ```

use std::collections::HashMap;
use std::sync::OnceLock;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

/// The dimension of the distilled vectors.
pub const DISTILLED_DIMENSION: usize = 128;

/// The vocabulary of all-MiniLM-L6-v2 (BERT uncased), one piece a line, in id order.
const VOCABULARY: &str = include_str!("../../data/distilled/vocab.txt");

/// One row per vocabulary piece: a little-endian f32 scale, then [`DISTILLED_DIMENSION`] signed
/// bytes; the piece's vector is the bytes times the scale.
const VECTORS: &[u8] = include_bytes!("../../data/distilled/vectors.bin");

const ROW: usize = 4 + DISTILLED_DIMENSION;

/// The longest word, in characters, that is split into pieces; longer ones are unknown, as in
/// BERT's tokenizer.
const MAX_WORD_CHARS: usize = 100;

/// The distilled table and its vocabulary, decoded once per process.
#[derive(Debug)]
pub struct DistilledVectors {
    ids: HashMap<&'static str, u32>,
    unknown: Option<u32>,
    rows: usize,
}

impl DistilledVectors {
    /// The table built into quiver.
    pub fn get() -> &'static DistilledVectors {
        static TABLE: OnceLock<DistilledVectors> = OnceLock::new();
        TABLE.get_or_init(|| {
            let ids: HashMap<&'static str, u32> =
                VOCABULARY.lines().enumerate().map(|(i, piece)| (piece, i as u32)).collect();
            let rows = VECTORS.len() / ROW;
            debug_assert_eq!(rows, ids.len(), "vectors.bin and vocab.txt disagree");
            let unknown = ids.get("[UNK]").copied();
            DistilledVectors { ids, unknown, rows }
        })
    }

    /// The piece ids of `text`, as BERT's uncased tokenizer gives them without `[CLS]`/`[SEP]`.
    pub fn piece_ids(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for word in pre_tokenize(&normalize(text)) {
            self.word_pieces(&word, &mut ids);
        }
        ids
    }

    /// The vector of `text`: the sum of its pieces' vectors, scaled to unit length; all zeros
    /// for a text without a piece (an empty one).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; DISTILLED_DIMENSION];
        for id in self.piece_ids(text) {
            self.add_row(id as usize, &mut v);
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }

    fn add_row(&self, id: usize, into: &mut [f32]) {
        if id >= self.rows {
            return;
        }
        let row = &VECTORS[id * ROW..(id + 1) * ROW];
        let scale = f32::from_le_bytes([row[0], row[1], row[2], row[3]]);
        for (x, &b) in into.iter_mut().zip(&row[4..]) {
            *x += scale * f32::from(b as i8);
        }
    }

    /// Greedy longest-match word pieces of one word (`##` before every piece but the first); a
    /// word that cannot be split, or is longer than [`MAX_WORD_CHARS`], is one unknown piece.
    fn word_pieces(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > MAX_WORD_CHARS {
            out.extend(self.unknown);
            return;
        }
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut candidate = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                candidate.clear();
                if start > 0 {
                    candidate.push_str("##");
                }
                candidate.push_str(&word[start..end]);
                if let Some(&id) = self.ids.get(candidate.as_str()) {
                    found = Some(id);
                    break;
                }
                // Back off one character, not one byte.
                end = word[..end].char_indices().next_back().map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    pieces.push(id);
                    start = end;
                }
                None => {
                    out.extend(self.unknown);
                    return;
                }
            }
        }
        out.extend(pieces);
    }
}

/// The cosine of two vectors of the same length (unit vectors from [`DistilledVectors::embed`]
/// give their dot product); 0 when either is all zeros.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    crate::enrich::embed::cosine(a, b)
}

/// BERT's text normalisation: control characters dropped, whitespace made a space, CJK
/// ideographs set apart, accents stripped (NFD, non-spacing marks dropped), lowercased.
fn normalize(text: &str) -> String {
    let mut spaced = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || (!matches!(c, '\t' | '\n' | '\r') && c.is_other()) {
            continue;
        }
        if c.is_whitespace() {
            spaced.push(' ');
        } else if is_cjk(c) {
            spaced.push(' ');
            spaced.push(c);
            spaced.push(' ');
        } else {
            spaced.push(c);
        }
    }
    spaced.nfd().filter(|c| !c.is_mark_nonspacing()).flat_map(char::to_lowercase).collect()
}

/// BERT's words: split at whitespace, each punctuation character a word of its own.
fn pre_tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split_whitespace() {
        let mut word = String::new();
        for c in chunk.chars() {
            if c.is_ascii_punctuation() || c.is_punctuation() {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                words.push(c.to_string());
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words
}

/// The CJK ideograph blocks BERT's tokenizer splits into one word per character.
fn is_cjk(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(text: &str) -> Vec<&'static str> {
        let vectors = DistilledVectors::get();
        let by_id: Vec<&str> = VOCABULARY.lines().collect();
        vectors.piece_ids(text).into_iter().map(|id| by_id[id as usize]).collect()
    }

    #[test]
    fn the_table_has_a_row_for_every_piece() {
        assert_eq!(VECTORS.len() % ROW, 0);
        assert_eq!(VECTORS.len() / ROW, VOCABULARY.lines().count());
    }

    #[test]
    fn text_is_split_as_berts_tokenizer_splits_it() {
        assert_eq!(pieces("Hello, World!"), ["hello", ",", "world", "!"]);
        assert_eq!(pieces("Café  déjà-vu"), ["cafe", "de", "##ja", "-", "vu"]);
        assert_eq!(pieces("unaffable"), ["una", "##ffa", "##ble"]);
        assert_eq!(pieces("日本"), ["日", "本"]);
        assert_eq!(pieces(&"x".repeat(101)), ["[UNK]"]);
        assert!(pieces("\u{0}\u{200b}").is_empty());
    }

    #[test]
    fn an_empty_text_has_a_zero_vector_and_others_unit_ones() {
        let vectors = DistilledVectors::get();
        assert!(vectors.embed("").iter().all(|&x| x == 0.0));
        let v = vectors.embed("list merge requests");
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
}
