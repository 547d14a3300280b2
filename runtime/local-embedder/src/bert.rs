//! The BERT encoder's forward pass over texts' token ids, on weights read from
//! `model.safetensors`, ending in pooled (mean or CLS), L2-normalised sentence vectors.
//!
//! Written out here instead of run through a general tensor library: a turn embeds one short
//! query (about ten tokens), where such a library's per-operation allocations, layout copies and
//! thread hand-offs cost as much as the arithmetic (candle's `BertModel` took 12–15 ms for a
//! ten-token query on this project's two-core bench machine, this pass 7–8 ms; the `embed` bench
//! of this crate and `select_local` of the host's). The texts of a call are stacked token by token: the weights are
//! read once for all of them, and attention runs within each text, so nothing is padded, there is
//! no attention mask, and a vector cannot depend on the other texts of the call.
//!
//! The matrix products (the dense layers', and attention's scores and weighted values per head)
//! run on one kernel over `pulp`, which picks AVX2/FMA, AVX-512 or NEON at run time in safe code;
//! everything else is plain loops over rows.

use pulp::{Arch, Simd, WithSimd};
use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::Pooling;

/// The fields of a Hugging Face BERT `config.json` this encoder reads.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab_size")]
    pub type_vocab_size: usize,
    #[serde(default = "default_layer_norm_eps")]
    pub layer_norm_eps: f64,
    #[serde(default = "default_hidden_act")]
    pub hidden_act: String,
    #[serde(default = "default_position_embedding_type")]
    pub position_embedding_type: String,
}

fn default_type_vocab_size() -> usize {
    2
}
fn default_layer_norm_eps() -> f64 {
    1e-12
}
fn default_hidden_act() -> String {
    "gelu".to_owned()
}
fn default_position_embedding_type() -> String {
    "absolute".to_owned()
}

impl Config {
    /// Rejects configurations this encoder would compute wrongly rather than fail on.
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.hidden_act != "gelu" {
            return Err(format!(
                "hidden_act {:?} is not supported (only \"gelu\", the erf GELU of BERT sentence \
                 embedders)",
                self.hidden_act
            ));
        }
        if self.position_embedding_type != "absolute" {
            return Err(format!(
                "position_embedding_type {:?} is not supported (only \"absolute\")",
                self.position_embedding_type
            ));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return Err(format!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        if self.hidden_size == 0 || self.intermediate_size == 0 || self.type_vocab_size == 0 {
            return Err("hidden_size, intermediate_size and type_vocab_size must be > 0".to_owned());
        }
        Ok(())
    }
}

/// `y = x · Wᵀ + b` for `x` of `rows × inputs`, `W` of `outputs × inputs` (row-major, as
/// PyTorch's `nn.Linear` stores it).
struct Dense {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

/// LayerNorm over the hidden dimension.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one product: rows `0..H` are the query's, then the key's, then
    /// the value's.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    intermediate: Dense,
    output: Dense,
    output_norm: Norm,
}

/// A loaded BERT encoder.
pub(crate) struct Bert {
    word: Vec<f32>,
    position: Vec<f32>,
    /// Token type 0's embedding: every text is a single segment.
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    vocab: usize,
    max_positions: usize,
    eps: f32,
    arch: Arch,
}

impl Bert {
    /// Reads the encoder's tensors from safetensors bytes; a missing tensor, a shape other than
    /// the config's, or a file that is not safetensors is an error naming it.
    pub(crate) fn load(config: &Config, bytes: &[u8]) -> Result<Self, String> {
        config.check()?;
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        // sentence-transformers saves the bare encoder; a `BertModel` saved whole prefixes it.
        let prefix =
            if tensors.tensor("embeddings.word_embeddings.weight").is_ok() { "" } else { "bert." };
        let read = |name: &str, shape: &[usize]| -> Result<Vec<f32>, String> {
            let full = format!("{prefix}{name}");
            let view = tensors.tensor(&full).map_err(|_| format!("it has no tensor {full}"))?;
            if view.shape() != shape {
                return Err(format!(
                    "{full} has the shape {:?}, config.json calls for {shape:?}",
                    view.shape()
                ));
            }
            to_f32(view.dtype(), view.data())
                .ok_or_else(|| format!("{full} is {:?}; F32, F16 and BF16 are read", view.dtype()))
        };
        let (h, i) = (config.hidden_size, config.intermediate_size);
        let dense = |name: &str, outputs: usize, inputs: usize| -> Result<Dense, String> {
            Ok(Dense {
                weight: read(&format!("{name}.weight"), &[outputs, inputs])?,
                bias: read(&format!("{name}.bias"), &[outputs])?,
                inputs,
                outputs,
            })
        };
        let norm = |name: &str| -> Result<Norm, String> {
            Ok(Norm {
                gamma: read(&format!("{name}.weight"), &[h])?,
                beta: read(&format!("{name}.bias"), &[h])?,
            })
        };

        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for n in 0..config.num_hidden_layers {
            let at = |part: &str| format!("encoder.layer.{n}.{part}");
            let (query, key, value) = (
                dense(&at("attention.self.query"), h, h)?,
                dense(&at("attention.self.key"), h, h)?,
                dense(&at("attention.self.value"), h, h)?,
            );
            let qkv = Dense {
                weight: [query.weight, key.weight, value.weight].concat(),
                bias: [query.bias, key.bias, value.bias].concat(),
                inputs: h,
                outputs: 3 * h,
            };
            layers.push(Layer {
                qkv,
                attention_out: dense(&at("attention.output.dense"), h, h)?,
                attention_norm: norm(&at("attention.output.LayerNorm"))?,
                intermediate: dense(&at("intermediate.dense"), i, h)?,
                output: dense(&at("output.dense"), h, i)?,
                output_norm: norm(&at("output.LayerNorm"))?,
            });
        }
        let token_types =
            read("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?;
        Ok(Self {
            word: read("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position: read(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type: token_types[..h].to_vec(),
            embedding_norm: norm("embeddings.LayerNorm")?,
            layers,
            hidden: h,
            heads: config.num_attention_heads,
            vocab: config.vocab_size,
            max_positions: config.max_position_embeddings,
            // The reference computes LayerNorm in f32 with the config's epsilon.
            eps: config.layer_norm_eps as f32,
            arch: Arch::new(),
        })
    }

    /// The sentence vectors of tokenised texts (special tokens included): for each, its last
    /// hidden states pooled as `pooling` says (the mean over its tokens, or its first token,
    /// `[CLS]`), L2-normalised. The texts' tokens are stacked into
    /// one matrix, so the weights are read once for all of them; attention stays within each
    /// text, so no text is padded and none sees another. A text the model cannot run is an error
    /// with its position.
    pub(crate) fn embed(
        &self,
        texts: &[&[u32]],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, (usize, String)> {
        let h = self.hidden;
        let mut spans = Vec::with_capacity(texts.len());
        let mut total = 0;
        for (index, ids) in texts.iter().enumerate() {
            if ids.is_empty() {
                return Err((index, "the tokenizer produced no tokens".to_owned()));
            }
            if ids.len() > self.max_positions {
                let message = format!(
                    "{} tokens exceed the model's {} positions",
                    ids.len(),
                    self.max_positions
                );
                return Err((index, message));
            }
            if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                let message =
                    format!("token id {id} is beyond the model's vocabulary of {}", self.vocab);
                return Err((index, message));
            }
            spans.push(total..total + ids.len());
            total += ids.len();
        }

        let mut x = vec![0.0f32; total * h];
        let tokens = texts.iter().flat_map(|ids| ids.iter().enumerate());
        for ((position, &id), row) in tokens.zip(x.chunks_exact_mut(h)) {
            let word = &self.word[id as usize * h..][..h];
            let place = &self.position[position * h..][..h];
            for (c, out) in row.iter_mut().enumerate() {
                *out = word[c] + place[c] + self.token_type[c];
            }
        }
        self.embedding_norm.apply(&mut x, self.eps);

        let intermediate_size = self.layers.first().map_or(0, |l| l.intermediate.outputs);
        let mut qkv = vec![0.0f32; total * 3 * h];
        let mut context = vec![0.0f32; total * h];
        let mut sum = vec![0.0f32; total * h];
        let mut intermediate = vec![0.0f32; total * intermediate_size];
        let mut transposed = Vec::new();
        for layer in &self.layers {
            layer.qkv.apply(self.arch, &x, &mut qkv, &mut transposed);
            for span in &spans {
                self.attention(&qkv, span.clone(), &mut context);
            }
            layer.attention_out.apply(self.arch, &context, &mut sum, &mut transposed);
            add_into(&mut sum, &x);
            layer.attention_norm.apply(&mut sum, self.eps);
            std::mem::swap(&mut x, &mut sum);

            layer.intermediate.apply(self.arch, &x, &mut intermediate, &mut transposed);
            intermediate.iter_mut().for_each(|v| *v = gelu(*v));
            layer.output.apply(self.arch, &intermediate, &mut sum, &mut transposed);
            add_into(&mut sum, &x);
            layer.output_norm.apply(&mut sum, self.eps);
            std::mem::swap(&mut x, &mut sum);
        }

        let pool = |span: &std::ops::Range<usize>| {
            let mut pooled = vec![0.0f32; h];
            match pooling {
                Pooling::Mean => {
                    for row in x[span.start * h..span.end * h].chunks_exact(h) {
                        add_into(&mut pooled, row);
                    }
                    let count = span.len() as f32;
                    pooled.iter_mut().for_each(|v| *v /= count);
                }
                Pooling::Cls => pooled.copy_from_slice(&x[span.start * h..][..h]),
            }
            // As torch's F.normalize: divide by the norm, floored at 1e-12.
            let norm = pooled.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            pooled.iter_mut().for_each(|v| *v /= norm);
            pooled
        };
        Ok(spans.iter().map(pool).collect())
    }

    /// Scaled dot-product self-attention of every head over the tokens of one text, the rows
    /// `span` (no mask: the text is unpadded). Per head, the query-key scores and the weighted
    /// sum of values are two products on the same kernel as the dense layers.
    fn attention(&self, qkv: &[f32], span: std::ops::Range<usize>, context: &mut [f32]) {
        let h = self.hidden;
        let d = h / self.heads;
        let m = span.len();
        let scale = 1.0 / (d as f32).sqrt();
        let mut queries = vec![0.0f32; m * d];
        let mut keys = vec![0.0f32; m * d];
        let mut values_by_column = vec![0.0f32; d * m];
        let mut scores = vec![0.0f32; m * m];
        for head in 0..self.heads {
            for (t, token) in span.clone().enumerate() {
                let row = &qkv[token * 3 * h + head * d..];
                queries[t * d..][..d].copy_from_slice(&row[..d]);
                keys[t * d..][..d].copy_from_slice(&row[h..h + d]);
                for (c, &v) in row[2 * h..2 * h + d].iter().enumerate() {
                    values_by_column[c * m + t] = v;
                }
            }
            product(self.arch, &queries, d, &keys, 0..m, &mut scores, m, 1);
            for row in scores.chunks_exact_mut(m) {
                let max = row.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b * scale));
                let mut total = 0.0;
                for score in row.iter_mut() {
                    *score = (*score * scale - max).exp();
                    total += *score;
                }
                row.iter_mut().for_each(|score| *score /= total);
            }
            // Written in place into the head's columns of `context`'s rows.
            let out = &mut context[span.start * h + head * d..];
            product(self.arch, &scores, m, &values_by_column, 0..d, out, h, 1);
        }
    }
}

/// Below this many multiply-adds a product runs on the calling thread: sharing it out costs
/// more than it saves.
const PARALLEL_MIN_MULTIPLY_ADDS: usize = 1 << 20;

/// From this many input rows a shared-out product splits the rows (each thread reads all the
/// weights, and writes whole output rows); below it, the weight rows (each thread reads its
/// share of the weights once, which is what a short query's pass is bound by).
const SPLIT_ROWS_FROM: usize = 64;

impl Dense {
    /// `out = x · Wᵀ + b` for every row of `x`. A large enough product is shared out over
    /// rayon's threads.
    fn apply(&self, arch: Arch, x: &[f32], out: &mut [f32], transposed: &mut Vec<f32>) {
        let (k, n) = (self.inputs, self.outputs);
        let m = x.len() / k;
        debug_assert_eq!(m * n, out.len());
        let threads = rayon::current_num_threads();
        if threads <= 1 || m * n * k < PARALLEL_MIN_MULTIPLY_ADDS {
            product(arch, x, k, &self.weight, 0..n, out, n, 1);
        } else if m >= SPLIT_ROWS_FROM {
            let rows_per_piece = m.div_ceil(threads);
            out.par_chunks_mut(rows_per_piece * n)
                .zip(x.par_chunks(rows_per_piece * k))
                .for_each(|(out, x)| product(arch, x, k, &self.weight, 0..n, out, n, 1));
        } else {
            // Written transposed (one weight row's outputs for every input row side by side),
            // so each thread's range of weight rows owns one contiguous piece.
            transposed.resize(m * n, 0.0);
            let weight_rows_per_piece = n.div_ceil(threads);
            transposed.par_chunks_mut(weight_rows_per_piece * m).enumerate().for_each(
                |(piece, part)| {
                    let start = piece * weight_rows_per_piece;
                    let end = start + part.len() / m;
                    product(arch, x, k, &self.weight, start..end, part, 1, m);
                },
            );
            for (i, row) in out.chunks_exact_mut(n).enumerate() {
                for (j, value) in row.iter_mut().enumerate() {
                    *value = transposed[j * m + i];
                }
            }
        }
        for row in out.chunks_exact_mut(n) {
            add_into(row, &self.bias);
        }
    }
}

/// `x · Wᵀ` for the rows of `x` (`k` values each) and the weight rows `weight_rows` (`k` values
/// each, row-major): the product of input row `i` and weight row `j` goes to
/// `out[i * row_stride + (j - weight_rows.start) * column_stride]`.
#[allow(clippy::too_many_arguments)]
fn product(
    arch: Arch,
    x: &[f32],
    k: usize,
    weight: &[f32],
    weight_rows: std::ops::Range<usize>,
    out: &mut [f32],
    row_stride: usize,
    column_stride: usize,
) {
    arch.dispatch(Product { x, k, weight, weight_rows, out, row_stride, column_stride });
}

/// The operands of one [`product`].
struct Product<'a> {
    x: &'a [f32],
    k: usize,
    weight: &'a [f32],
    weight_rows: std::ops::Range<usize>,
    out: &'a mut [f32],
    row_stride: usize,
    column_stride: usize,
}

impl WithSimd for Product<'_> {
    type Output = ();

    /// Blocks of weight rows small enough to stay in cache while every input row passes them;
    /// within a block, tiles of input rows × weight rows with eight accumulators each (four
    /// rows × two weight rows, and for the last one to three rows 3 × 2, 2 × 4 or 1 × 8), so
    /// each load feeds several multiply-adds and eight independent sums hide their latency.
    #[inline(always)]
    fn with_simd<S: Simd>(mut self, simd: S) {
        const WEIGHT_ROWS_PER_BLOCK: usize = 32;
        let m = self.x.len() / self.k;
        let (start, end) = (self.weight_rows.start, self.weight_rows.end);
        let mut block_start = start;
        while block_start < end {
            let block = block_start..(block_start + WEIGHT_ROWS_PER_BLOCK).min(end);
            let mut i = 0;
            while i + 4 <= m {
                self.row_group::<S, 4, 2>(simd, i, block.clone());
                i += 4;
            }
            match m - i {
                3 => self.row_group::<S, 3, 2>(simd, i, block.clone()),
                2 => self.row_group::<S, 2, 4>(simd, i, block.clone()),
                1 => self.row_group::<S, 1, 8>(simd, i, block.clone()),
                _ => {}
            }
            block_start = block.end;
        }
    }
}

impl Product<'_> {
    /// Input rows `i..i + R` against the weight rows of `block`, `C` weight rows at a time.
    #[inline(always)]
    fn row_group<S: Simd, const R: usize, const C: usize>(
        &mut self,
        simd: S,
        i: usize,
        block: std::ops::Range<usize>,
    ) {
        let mut j = block.start;
        while j + C <= block.end {
            self.tile::<S, R, C>(simd, i, j);
            j += C;
        }
        for j in j..block.end {
            self.tile::<S, R, 1>(simd, i, j);
        }
    }

    /// `R × C` outputs: input rows `i..i + R` against weight rows `j..j + C`.
    #[inline(always)]
    fn tile<S: Simd, const R: usize, const C: usize>(&mut self, simd: S, i: usize, j: usize) {
        let k = self.k;
        let inputs: [(&[S::f32s], &[f32]); R] =
            std::array::from_fn(|r| S::as_simd_f32s(&self.x[(i + r) * k..][..k]));
        let weights: [(&[S::f32s], &[f32]); C] =
            std::array::from_fn(|c| S::as_simd_f32s(&self.weight[(j + c) * k..][..k]));
        // Every operand cut to one length, so the loop below needs no bounds checks.
        let len = weights[0].0.len();
        let input_heads: [&[S::f32s]; R] = inputs.map(|(head, _)| &head[..len]);
        let weight_heads: [&[S::f32s]; C] = weights.map(|(head, _)| &head[..len]);
        let mut acc = [[simd.splat_f32s(0.0); C]; R];
        for p in 0..len {
            let w: [S::f32s; C] = std::array::from_fn(|c| weight_heads[c][p]);
            for r in 0..R {
                let v = input_heads[r][p];
                for c in 0..C {
                    acc[r][c] = simd.mul_add_f32s(v, w[c], acc[r][c]);
                }
            }
        }
        let first = j - self.weight_rows.start;
        for r in 0..R {
            for c in 0..C {
                let mut sum = simd.reduce_sum_f32s(acc[r][c]);
                for (a, b) in inputs[r].1.iter().zip(weights[c].1) {
                    sum += a * b;
                }
                self.out[(i + r) * self.row_stride + (first + c) * self.column_stride] = sum;
            }
        }
    }
}

impl Norm {
    fn apply(&self, x: &mut [f32], eps: f32) {
        let h = self.gamma.len();
        for row in x.chunks_exact_mut(h) {
            let mean = row.iter().sum::<f32>() / h as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
            let scale = 1.0 / (variance + eps).sqrt();
            for (c, v) in row.iter_mut().enumerate() {
                *v = (*v - mean) * scale * self.gamma[c] + self.beta[c];
            }
        }
    }
}

fn add_into(target: &mut [f32], other: &[f32]) {
    for (t, o) in target.iter_mut().zip(other) {
        *t += o;
    }
}

/// The erf GELU BERT was trained with (not the tanh approximation).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

fn to_f32(dtype: Dtype, bytes: &[u8]) -> Option<Vec<f32>> {
    match dtype {
        Dtype::F32 => Some(
            bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
        ),
        Dtype::F16 => Some(
            bytes
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        ),
        Dtype::BF16 => Some(
            bytes
                .chunks_exact(2)
                .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_matches_a_plain_product_for_every_remainder() {
        // Row counts and widths that leave remainders in every loop of the kernel.
        for (rows, inputs, outputs) in [
            (1, 3, 1),
            (5, 17, 35),
            (9, 64, 33),
            (4, 8, 2),
            (7, 384, 1500),
            (6, 40, 70),
            (3, 9, 13),
        ] {
            let weight: Vec<f32> =
                (0..inputs * outputs).map(|v| ((v * 37 % 101) as f32 - 50.0) / 50.0).collect();
            let bias: Vec<f32> = (0..outputs).map(|v| v as f32 / 10.0).collect();
            let x: Vec<f32> =
                (0..rows * inputs).map(|v| ((v * 13 % 29) as f32 - 14.0) / 7.0).collect();
            let dense = Dense { weight, bias, inputs, outputs };
            let mut out = vec![f32::NAN; rows * outputs];
            dense.apply(Arch::new(), &x, &mut out, &mut Vec::new());
            for i in 0..rows {
                for j in 0..outputs {
                    let expected: f32 = (0..inputs)
                        .map(|p| x[i * inputs + p] * dense.weight[j * inputs + p])
                        .sum::<f32>()
                        + dense.bias[j];
                    let got = out[i * outputs + j];
                    assert!(
                        (got - expected).abs() < 1e-4 * (1.0 + expected.abs()),
                        "{rows}x{inputs}x{outputs} [{i},{j}]: {got} vs {expected}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_config_this_encoder_would_compute_wrongly_is_refused() {
        let config: Config = serde_json::from_str(
            r#"{"vocab_size": 10, "hidden_size": 8, "num_hidden_layers": 1,
                "num_attention_heads": 2, "intermediate_size": 16,
                "max_position_embeddings": 4, "hidden_act": "relu"}"#,
        )
        .unwrap();
        assert!(config.check().unwrap_err().contains("relu"));
        let config = Config { hidden_act: "gelu".to_owned(), num_attention_heads: 3, ..config };
        assert!(config.check().unwrap_err().contains("multiple"));
    }
}
