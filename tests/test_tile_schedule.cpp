// The Hopper tensor-core kernel's tile schedule (ops/cuda/tile_schedule.h)
// is plain C++: how its blocks deal whole tiles and cut the tail is checked
// here on every machine.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/tile_schedule.h"

namespace fgl::cuda::tile_schedule {
namespace {

// Every step of every tail tile goes to exactly one block; a block's pieces
// follow each other in step order and sit in its two slots; the blocks
// that first_block and last_block name for a tail tile are the ones whose
// pieces make it up, in step order, without a gap.
void expect_tail_covered(const Layout& l) {
  SCOPED_TRACE(::testing::Message()
               << "blocks " << l.blocks << ", steps " << l.steps
               << ", whole tiles " << l.whole_tiles << ", tail "
               << l.tail_tiles);
  std::vector<int> taken(static_cast<size_t>(l.tail_tiles) * l.steps, 0);
  // For each tail tile, the blocks taking pieces of it and the steps they
  // cover, in block order.
  std::vector<std::vector<Piece>> pieces_of(l.tail_tiles);
  std::vector<std::vector<int>> blocks_of(l.tail_tiles);
  for (int block = 0; block < l.blocks; ++block) {
    const int pieces = tail_pieces(l, block);
    ASSERT_GE(pieces, 1) << "block " << block;
    ASSERT_LE(pieces, 2) << "block " << block;
    for (int i = 0; i < pieces; ++i) {
      const Piece piece = tail_piece(l, block, i);
      const int u = piece.tile - l.whole_tiles;
      ASSERT_GE(u, 0);
      ASSERT_LT(u, l.tail_tiles);
      ASSERT_LT(piece.first_step, piece.end_step);
      ASSERT_LE(piece.end_step, l.steps);
      EXPECT_EQ(slot(l, block, u), 2 * block + i);
      for (int s = piece.first_step; s < piece.end_step; ++s) {
        ++taken[static_cast<size_t>(u) * l.steps + s];
      }
      pieces_of[u].push_back(piece);
      blocks_of[u].push_back(block);
    }
  }
  for (size_t i = 0; i < taken.size(); ++i) {
    ASSERT_EQ(taken[i], 1) << "tail step " << i;
  }
  for (int u = 0; u < l.tail_tiles; ++u) {
    SCOPED_TRACE(::testing::Message() << "tail tile " << u);
    ASSERT_FALSE(blocks_of[u].empty());
    EXPECT_EQ(first_block(l, u), blocks_of[u].front());
    EXPECT_EQ(last_block(l, u), blocks_of[u].back());
    EXPECT_EQ(static_cast<int>(blocks_of[u].size()),
              last_block(l, u) - first_block(l, u) + 1);
    int next_step = 0;
    for (const Piece& piece : pieces_of[u]) {
      EXPECT_EQ(piece.first_step, next_step);
      next_step = piece.end_step;
    }
    EXPECT_EQ(next_step, l.steps);
  }
}

// Every step of every tile goes to exactly one block's shares, whole tiles
// first in each block's order.
void expect_tiles_covered(const Layout& l) {
  std::vector<int> taken(
      static_cast<size_t>(l.whole_tiles + l.tail_tiles) * l.steps, 0);
  for (int block = 0; block < l.blocks; ++block) {
    bool in_tail = false;
    for (int i = 0; i < shares(l, block); ++i) {
      const Piece piece = share(l, block, i);
      const bool whole = piece.tile < l.whole_tiles;
      EXPECT_FALSE(whole && in_tail) << "block " << block << ", share " << i;
      in_tail = !whole;
      if (whole) {
        EXPECT_EQ(piece.tile % l.blocks, block);
        EXPECT_EQ(piece.first_step, 0);
        EXPECT_EQ(piece.end_step, l.steps);
      }
      for (int s = piece.first_step; s < piece.end_step; ++s) {
        ++taken[static_cast<size_t>(piece.tile) * l.steps + s];
      }
    }
  }
  for (size_t i = 0; i < taken.size(); ++i) {
    ASSERT_EQ(taken[i], 1) << "step " << i % l.steps << " of tile "
                           << i / l.steps;
  }
}

TEST(TileSchedule, CutsTheLastRoundWhereItLeavesBlocksIdle) {
  // float32's prefill on 132 blocks: 1024 tiles of 128 steps, 7 whole
  // rounds and 100 tiles cut, each block taking 96 or 97 of their steps.
  const Layout l = plan(1024, 128, 132, 8);
  EXPECT_EQ(l.blocks, 132);
  EXPECT_EQ(l.steps, 128);
  EXPECT_EQ(l.whole_tiles, 924);
  EXPECT_EQ(l.tail_tiles, 100);
  expect_tail_covered(l);
  const Piece first = tail_piece(l, 0, 0);
  EXPECT_EQ(first.tile, 924);
  EXPECT_EQ(first.first_step, 0);
  EXPECT_EQ(first.end_step, 96);
  ASSERT_EQ(tail_pieces(l, 1), 2);
  EXPECT_EQ(tail_piece(l, 1, 0).first_step, 96);
  EXPECT_EQ(tail_piece(l, 1, 1).tile, 925);
  EXPECT_EQ(tail_piece(l, 1, 1).end_step, 65);
  EXPECT_EQ(first_block(l, 0), 0);
  EXPECT_EQ(last_block(l, 0), 1);
  // Arrival counts, then two slots of a tile's float32 sums a block.
  EXPECT_EQ(counts_bytes(l), 1024);
  EXPECT_EQ(workspace_bytes(l, 128 * 128), 1024 + 2 * 132 * 128 * 128 * 4);
}

TEST(TileSchedule, DealsEveryTileWholeWhereRoundsAreFull) {
  for (const int64_t tiles : {1, 100, 132, 264, 1056}) {
    const Layout l = plan(tiles, 128, 132, 8);
    EXPECT_EQ(l.whole_tiles, tiles);
    EXPECT_EQ(l.tail_tiles, 0);
    EXPECT_EQ(workspace_bytes(l, 128 * 128), 0);
    expect_tiles_covered(l);
  }
  // Tiles dealt whole that are not whole rounds: blocks 0-3 take one more.
  const Layout uneven = plan(136, 8, 132, 0);
  EXPECT_EQ(shares(uneven, 3), 2);
  EXPECT_EQ(shares(uneven, 4), 1);
  EXPECT_EQ(share(uneven, 3, 1).tile, 135);
  expect_tiles_covered(uneven);
  // Without a minimum (0) nothing is cut; with too few steps a block, the
  // tail stays whole (44 tiles of 16 steps: 5 a block, under 8).
  EXPECT_EQ(plan(1024, 128, 132, 0).tail_tiles, 0);
  EXPECT_EQ(plan(176, 16, 132, 8).tail_tiles, 0);
  EXPECT_EQ(plan(176, 16, 132, 5).tail_tiles, 44);
  // Nor where it would end the last round too few steps sooner: 130 of 132
  // blocks busy in it, 32 steps a tile, would end 0.5 of a step sooner.
  EXPECT_EQ(plan(262, 32, 132, 1).tail_tiles, 0);
  EXPECT_EQ(plan(262, 66, 132, 1).tail_tiles, 130);
}

TEST(TileSchedule, CoversEveryStepOfTheTailOnce) {
  for (const int blocks : {1, 2, 3, 7, 64, 132}) {
    for (int64_t tiles = 2; tiles <= 700; tiles += tiles < 40 ? 1 : 13) {
      for (const int steps : {1, 2, 3, 5, 8, 69, 128, 257}) {
        for (const int min_steps : {1, 4}) {
          const Layout l = plan(tiles, steps, blocks, min_steps);
          ASSERT_EQ(l.whole_tiles + l.tail_tiles, tiles);
          expect_tiles_covered(l);
          if (l.tail_tiles == 0) continue;
          ASSERT_TRUE(cuts_tail_of(l, tiles, steps, blocks));
          ASSERT_GE(int64_t{l.tail_tiles} * steps, int64_t{blocks} * min_steps);
          ASSERT_GE(int64_t{blocks - l.tail_tiles} * steps,
                    int64_t{blocks} * min_steps);
          expect_tail_covered(l);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

// The launcher takes only a layout that cuts this grid's tail, since the
// kernel trusts it: a longer share than a tile would drop steps and run
// past its block's two slots.
TEST(TileSchedule, TellsALayoutThatDoesNotCutThisGridsTail) {
  const Layout l = plan(1024, 128, 132, 8);
  EXPECT_TRUE(cuts_tail_of(l, 1024, 128, 132));
  EXPECT_FALSE(cuts_tail_of(l, 1025, 128, 132));  // other tiles
  EXPECT_FALSE(cuts_tail_of(l, 1024, 64, 132));   // other steps
  EXPECT_FALSE(cuts_tail_of(l, 1024, 128, 128));  // another grid
  EXPECT_FALSE(cuts_tail_of(plan(1056, 128, 132, 8), 1056, 128, 132));
  Layout forged = l;
  forged.whole_tiles = 792;  // 232 tiles cut over 132 blocks
  forged.tail_tiles = 232;
  EXPECT_FALSE(cuts_tail_of(forged, 1024, 128, 132));
  forged.whole_tiles = 923;  // not whole rounds
  forged.tail_tiles = 101;
  EXPECT_FALSE(cuts_tail_of(forged, 1024, 128, 132));
}

}  // namespace
}  // namespace fgl::cuda::tile_schedule
