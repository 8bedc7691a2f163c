// How the Hopper tensor-core kernel's persistent blocks deal the tiles of
// out, shared by the kernel (sm90/wgmma_kernel.cuh), its launcher and the
// policy that plans it (kernel_choice.h). Plain C++: no CUDA type.
//
// Tiles dealt whole, round-robin, leave blocks idle in the last round
// wherever the tiles are not a multiple of the blocks (144 tiles on 132
// blocks take 2 rounds for 1.09 rounds of work). The tail split deals only
// whole rounds whole; the tail's tiles are cut along their contraction
// steps instead, block b taking steps [b * I / blocks, (b + 1) * I / blocks)
// of the tail's I = tail_tiles * steps, in (tile, step) order (the
// "stream-K" schedule). A tile whose steps more than one block took is
// finished by whichever of them arrives last: each writes its float32 sums
// to a workspace slot, and the last adds every block's in step order, so
// the bits do not depend on which arrived last.
#pragma once

#include <cstdint>

namespace fgl::cuda::tile_schedule {

/// A persistent grid's tiles: blocks x rounds whole, then the tail's.
struct Layout {
  int blocks = 0;       // the grid
  int steps = 0;        // contraction steps of a tile
  int whole_tiles = 0;  // dealt whole: a multiple of blocks, or every tile
  int tail_tiles = 0;   // cut along their steps: fewer than blocks
};

/// A block's share of one tile: steps [first_step, end_step).
struct Piece {
  int tile = 0;
  int first_step = 0;
  int end_step = 0;
};

/// The tail's steps before block `block`'s share.
constexpr int64_t tail_start(const Layout& l, int block) {
  return int64_t{block} * l.tail_tiles * l.steps / l.blocks;
}

/// Pieces of tail tiles the block takes: 0 to 2 (a share is shorter than a
/// tile, as the tail holds fewer tiles than blocks).
constexpr int tail_pieces(const Layout& l, int block) {
  const int64_t first = tail_start(l, block);
  const int64_t end = tail_start(l, block + 1);
  if (end == first) return 0;
  return first / l.steps == (end - 1) / l.steps ? 1 : 2;
}

/// The block's i-th piece of the tail, in step order.
constexpr Piece tail_piece(const Layout& l, int block, int i) {
  const int64_t first = tail_start(l, block);
  const int64_t end = tail_start(l, block + 1);
  const int64_t tile = first / l.steps + i;
  const int64_t from = i == 0 ? first : tile * l.steps;
  const int64_t to = end < (tile + 1) * l.steps ? end : (tile + 1) * l.steps;
  Piece piece;
  piece.tile = l.whole_tiles + static_cast<int>(tile);
  piece.first_step = static_cast<int>(from - tile * l.steps);
  piece.end_step = static_cast<int>(to - tile * l.steps);
  return piece;
}

/// The whole tiles block `block` takes: block, block + blocks, ... below
/// whole_tiles.
constexpr int whole_shares(const Layout& l, int block) {
  return block < l.whole_tiles ? (l.whole_tiles - block - 1) / l.blocks + 1 : 0;
}

/// The shares of tiles the block takes in turn: its whole tiles, then its
/// pieces of the tail.
constexpr int shares(const Layout& l, int block) {
  return whole_shares(l, block) + tail_pieces(l, block);
}

/// The block's i-th share.
constexpr Piece share(const Layout& l, int block, int i) {
  const int whole = whole_shares(l, block);
  if (i >= whole) return tail_piece(l, block, i - whole);
  Piece piece;
  piece.tile = block + i * l.blocks;
  piece.end_step = l.steps;
  return piece;
}

/// The block whose share holds the tail's step `step`.
constexpr int block_of(const Layout& l, int64_t step) {
  // The largest b with b * I / blocks <= step.
  const int64_t total = int64_t{l.tail_tiles} * l.steps;
  return static_cast<int>(((step + 1) * l.blocks + total - 1) / total - 1);
}

/// The blocks that share tail tile `u` (0 for the first tail tile), first
/// to last in step order: each takes a piece of it.
constexpr int first_block(const Layout& l, int u) {
  return block_of(l, int64_t{u} * l.steps);
}
constexpr int last_block(const Layout& l, int u) {
  return block_of(l, int64_t{u + 1} * l.steps - 1);
}

/// The workspace slot of `block`'s piece of tail tile `u`: a block's first
/// piece in slot 2 * block, its second in 2 * block + 1.
constexpr int slot(const Layout& l, int block, int u) {
  return 2 * block + (tail_start(l, block) / l.steps == u ? 0 : 1);
}

/// Arrival counts a tail tile keeps, one for each of the kernel's consumer
/// warp groups (each finishes its rows of a tile on its own).
constexpr int kCountsPerTile = 2;

/// Bytes of the arrival counts (zeroed before each launch), then of the
/// slots' sums (`tile_values` float32 sums each), where they start.
constexpr int64_t counts_bytes(const Layout& l) {
  return (int64_t{l.tail_tiles} * kCountsPerTile * 4 + 255) / 256 * 256;
}
/// Bytes of the workspace a launch with a tail needs (none without).
constexpr int64_t workspace_bytes(const Layout& l, int64_t tile_values) {
  return l.tail_tiles == 0
             ? 0
             : counts_bytes(l) + int64_t{2} * l.blocks * tile_values * 4;
}

/// Whether `l` cuts the tail of `tiles` tiles of `steps` steps on a grid
/// of `blocks`, as plan() does: whole rounds, then fewer tiles than blocks.
constexpr bool cuts_tail_of(const Layout& l, int64_t tiles, int steps,
                            int blocks) {
  return blocks > 0 && steps > 0 && l.blocks == blocks && l.steps == steps &&
         l.tail_tiles > 0 && l.tail_tiles < blocks && l.whole_tiles >= 0 &&
         l.whole_tiles % blocks == 0 &&
         int64_t{l.whole_tiles} + l.tail_tiles == tiles;
}

/// The layout of `tiles` tiles of `steps` steps on a grid of `blocks`:
/// the last round's tiles cut where they leave blocks idle, where each
/// block then takes at least `min_tail_steps` of their steps and the round
/// ends at least as many steps sooner (none where that is 0), else every
/// tile whole.
constexpr Layout plan(int64_t tiles, int steps, int blocks,
                      int min_tail_steps) {
  Layout l;
  l.blocks = blocks;
  l.steps = steps;
  const int64_t last_round = tiles > blocks ? tiles % blocks : 0;
  const int64_t least = int64_t{blocks} * min_tail_steps;
  const bool cut = min_tail_steps > 0 && last_round * steps >= least &&
                   (blocks - last_round) * steps >= least;
  const int64_t rest = cut ? last_round : 0;
  l.whole_tiles = static_cast<int>(tiles - rest);
  l.tail_tiles = static_cast<int>(rest);
  return l;
}

}  // namespace fgl::cuda::tile_schedule
