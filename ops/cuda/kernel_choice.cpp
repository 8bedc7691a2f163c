#include "kernel_choice.h"

#include <algorithm>
#include <utility>

#include "forced_route.h"
#include "stream_layout.h"
#include "warp_dot_layout.h"
#include "warp_mma_layout.h"

namespace fgl::cuda {
namespace {

// The architecture the fused kernels' table was measured on (the streaming
// kernel is built for it alone).
constexpr int kMeasuredArch = 90;
// Rows of B up to which the streaming kernel beat cat + cuBLAS in every
// measured problem on the H200 (bench/NOTES.md, "CUDA routing"): 16 in
// float16/bfloat16, 64 in float32. float64 was not measured: cuBLAS keeps it.
constexpr int64_t kMaxStreamRowsHalf = 16;
// Half types up to 32 rows (one row tile) from this weight (the warp-mma
// kernel takes it up to 8 MiB): "v27" 32,24-32,128,4096 1.14-1.26x, and
// since the plans keep their clusters resident ("v28") 32,24,128,2048
// 1.34x, 24,24,128,4096 1.29x.
constexpr int64_t kMaxStreamRowsHalfLarge = 32;
constexpr int64_t kMinStreamWeightHalfLarge = int64_t{8} << 20;
// That band holds only where x's stage tiles ride in the ring and the grid
// is one wave on at least this share of the multiprocessors: x in a slab
// lost on an H100 ("v56": 32,28,80,5400 0.77x, 32,28,96,5400 0.71x), and on
// the H200 a block streams at a multiprocessor's share of the bandwidth, so
// fewer blocks lost (32,28,128,4608-5400 0.84-0.94x, 72-85 blocks; 96 won,
// 1.03-1.44x), as did a second wave (12,24,128,11344 0.79x, 178 blocks).
constexpr int64_t kMinStreamGridPercentHalfLarge = 70;
// Half types past 32 rows, up to 256, over contractions too long for the
// stationary weight, where the 32-row tiles read at most 16 MiB of weight
// between them ("v37": 32,64-256,128,256 and 16,128,128,512-1024 1.2-1.8x;
// 32 MiB read, 32,128,128,1024, lost to the cluster split). With x in a
// slab up to 1024 columns, as measured ("v56": 32,64-256,80,256 1.23-1.54x,
// 16,64,112,1024 1.14x); 8,105,80,1416 lost ("v66", an H100: 0.88x).
constexpr int64_t kMaxStreamRowsHalfLong = 256;
constexpr int64_t kMaxStreamReadHalfLong = int64_t{16} << 20;
constexpr int64_t kMaxStreamColumnsHalfLongSlab = 1024;
constexpr int64_t kMaxStreamRowsFloat = 64;
// float32 past 64 rows ("v28"): to 128 rows from 32 MiB up to 128 MiB of
// weight (32,80-128,128,4096 1.7-1.8x; 64,128,128,8192 lost, each row tile
// reading 256 MiB), to 256 rows below 32 MiB (16,192-256,128,2048 1.6-1.8x,
// 8,128-256,64,1024 2.2-2.8x; "v66", an H100, between 2 and 16 MiB, where
// the warp-mma kernel took 65 to 128 rows before: 16,65-100,128,1024 and
// 16,65-100,64,2048 1.6-2.4x against the stream's 2.7-4.2x,
// 8,65-256,128,3000 1.6-2.0x).
constexpr int64_t kMaxStreamRowsFloatLarge = 128;
constexpr int64_t kMaxStreamRowsFloatMid = 256;
constexpr int64_t kMaxStreamWeightFloatLarge = int64_t{128} << 20;
constexpr int64_t kMaxStreamWeightFloatMid = int64_t{32} << 20;
// Past one row tile, float32 streams in at most this many waves of blocks:
// each wave pays a block's start and tail again (about 4 us on an H100,
// "v57"), and cuBLAS won past three (8,33-48,64,16384-32768 0.74-0.97x,
// 16-24,48,64,32768 0.85-0.89x; three waves won 1.27-1.46x).
constexpr int64_t kMaxStreamWavesFloatRowTiles = 3;
// Where a block streams a short stretch of the contraction alone (no
// cluster split) after gathering its x slab (x not in the ring), float32
// streams in at most two waves of blocks: each wave waits for its slabs
// again ("v69", an H100: 71 such problems in two to three waves streamed at
// 0.76-1.15x, 36 of them below 1.00x, 16,128,40,5486 0.91x). Two waves or
// fewer, longer stretches and cluster splits won (16,96,40,5486 1.14x,
// 32,128,33,2743 1.28x, 48,100,33,2743 1.59x).
constexpr int64_t kMaxStreamSlabStagesFloatManyWaves = 27;
constexpr int64_t kMaxStreamSlabWavesFloatShort = 2;
// float32 under TF32: cuBLAS's one pass reads the weight once to 128 rows,
// and the kernel (three products) lost past 16 ("v28": 32,32,128,4096 0.84x).
constexpr int64_t kMaxStreamRowsFloatTf32 = 16;
// Below this many weight bytes the kernel lost to cat + cuBLAS in float32:
// too little weight to stream for its fixed costs (the 4,12,32,56 problem).
constexpr int64_t kMinFloatWeightBytes = 1 << 20;
// A contraction this short (a few stages a block) streamed in float32 only
// up to kMaxShortStreamRowsFloat rows: 2,24,64,16384 lost (bench/NOTES.md,
// "v16").
constexpr int64_t kShortContraction = 512;
constexpr int64_t kMaxShortStreamRowsFloat = 16;
// The weight ring's depth: at most kMaxRingStages, and at least
// kMinRingStages beside the x slab, if any (fewer leave too few bytes in
// flight).
constexpr int kMaxRingStages = 16;
constexpr int kMinRingStages = 4;
// A grid of at least this many eighths of the multiprocessors, one block
// each, covers the GPU: it leaves the next grid's blocks too few free ones
// to start on.
constexpr int64_t kFullGridEighths = 7;
// float32 blocks ask L2 for their first stages before the wait
// (bench/NOTES.md "v31").
constexpr int kPrefetchStagesFloat = 4;
// Half-type blocks do so only where the grid before lets theirs start late,
// once its blocks have issued their last copies, and where a block streams
// few stages: their prefetches then fall in that grid's tail rather than
// its stream; blocks of more stages lost with it ("v54").
constexpr int kPrefetchStagesHalf = 4;
constexpr int64_t kLateNextGridMaxStages = 32;
// Copies of several weight stages (stream::copy_stages) won 1-16% where a
// block streams 128 stages or more, and lost 1.5-6% at 22-64 stages
// ("v45").
constexpr int64_t kMinCopyStagesPerBlock = 128;
// The warp-dot kernel splits contractions until this many warps a
// multiprocessor take part.
constexpr int64_t kWarpDotWarpsPerSm = 16;
// Where the warp-dot kernel beat the streaming kernel and cuBLAS on the H200
// (bench/NOTES.md, "CUDA routing"), in weight bytes read: the weight once
// per row tile of warp_dot::rows_per_warp rows. Half precision also needs
// few warps (output columns times row tiles): each warp's fixed costs grow
// with their number. float32 decode (one row) won at every weight measured
// (to 128 MiB) from contractions of kShortContraction on; shorter ones, over
// many columns, stream (2,1,64,16384).
constexpr int64_t kWarpDotMaxReadHalf = int64_t{2} << 20;
constexpr int64_t kWarpDotMaxWarpsHalf = 2048;
constexpr int64_t kWarpDotMaxReadFloat = int64_t{4} << 20;
// float32's two rows (the instance with four loads in flight a lane) won
// to 16 MiB ("v30": 16,2,128,1024 4.84 against the streaming kernel's 6.77
// us, 16,2,128,2048 7.40 against 7.86; 32 MiB tied).
constexpr int64_t kWarpDotMaxReadFloatTwoRows = int64_t{16} << 20;
constexpr int64_t kWarpDotMaxReadDouble = int64_t{8} << 20;
// Past that read, where few warps (output columns times row tiles) share a
// long contraction over a weight that stays in L2, its splits keep every
// warp busy while the streaming kernel's clusters of a few column tiles
// cannot ("v66", an H100: 64,18,112,32 6.5 us against the stream's 14.0
// and cat + cuBLAS's 46; 64,62,112,16 6.8 against 14.5 and 45; over 528
// and more warps or shorter contractions the stream won).
constexpr int64_t kWarpDotMaxWarpsLongContraction = 512;
constexpr int64_t kMinWarpDotRowsLongContraction = 16;
constexpr int64_t kWarpDotLongContraction = 2048;
constexpr int64_t kWarpDotMaxWeightLongContraction = int64_t{4} << 20;
// Where the warp-mma kernel beat every other route on the H200 (bench/NOTES.md,
// "v16"), 16-bit types: from 1024 output columns (fewer leave too few
// warps; the warp-dot kernel keeps them), up to 16 rows at every weight
// measured (0.25 to 128 MiB; one grid row tile reads the weight once), and
// up to 32 rows with at most 8 MiB (two row tiles read it twice; 4 MiB
// before "v27"). The warp-dot kernel's 2- and 4-row instances tied or won
// where they read at most 2 MiB.
constexpr int64_t kMinWarpMmaColumns = 1024;
// Fewer columns past 32 rows ("v37"): up to 1 MiB of weight and 131072
// outputs (8,64-512,64,256, 8,128,64,512, 16,128,128,256: 1.7-1.8x; twice
// the outputs lost to the stationary weight).
// Contractions up to 2048, the longest measured: 64,87,256,32 lost ("v66",
// an H100: 0.75x).
constexpr int64_t kMaxWarpMmaOutputsFewColumns = int64_t{1} << 17;
constexpr int64_t kMaxWarpMmaContractionFewColumns = 2048;
constexpr int64_t kWarpMmaMaxWeightTwoTiles = int64_t{8} << 20;
// Past two n-tiles, up to 128 rows, the weight of 8,64,1024 (1 MiB, read
// from L2 by each row tile) still won 1.6-1.8x ("v27").
constexpr int64_t kWarpMmaMaxRowsHalf = 128;
constexpr int64_t kWarpMmaMaxWeightManyTiles = int64_t{1} << 20;
// float32 (three TF32 products, "v17"): past one pass of 16 rows, where the
// streaming kernel's 32-row tiles and cuBLAS took over, up to 128 rows and
// 64 MiB of weight (256 MiB lost, each pass reading it from memory), from
// contractions of 256 (the shortest measured). Where the streaming kernel
// still runs (to kMaxStreamRowsFloat rows) it kept contractions of 1024 to
// 2048 over more than 4 MiB (16,64,128,2048), and since x's tiles travel in
// its ring ("v27") every weight from kStreamOverWarpMmaWeightFloat
// (32,24-64,128,4096, 64 MiB: 1.5x faster; at 16 MiB the warp-mma kernel
// still won then, 16,24-32,128,2048 and 32,48,128,1024).
constexpr int64_t kMinWarpMmaContractionFloat = 256;
// Below it, from 2 to 16 rows and 1 MiB of weight, it beat cat + cuBLAS
// 1.5-2.8x and the routes taken before by up to 3.6x, tying them at
// 1,2,128,16384 and 1,16,128,4096 ("v56", an H100: 1,2-16,64-128,4096-16384;
// the H200: 1,16,112-128,18224 1.49-1.63x, the stream 0.82-0.99x).
constexpr int64_t kMaxWarpMmaRowsShortFloat = 16;
// From 17 to 64 rows it won there below 2 MiB of weight (2.0-2.3x against
// cat + cuBLAS, where the warp-dot kernel and cuBLAS's gathered view had
// 0.89-1.31x: "v57", an H100, 1-4,24-64,32-128,1352-4096); 4 MiB over a
// long K lost ("v56": 1,42,32,31832 0.93x).
constexpr int64_t kMaxWarpMmaRowsShortFloatLight = 64;
constexpr int64_t kMaxWarpMmaWeightShortFloatLight = int64_t{2} << 20;
constexpr int64_t kMaxWarpMmaRowsFloat = 128;
constexpr int64_t kWarpMmaMaxWeightFloat = int64_t{64} << 20;
constexpr int64_t kWarpMmaStreamWeightFloat = int64_t{4} << 20;
constexpr int64_t kWarpMmaLongContraction = 4096;
constexpr int64_t kStreamOverWarpMmaWeightFloat = int64_t{32} << 20;
// float32 in one n-tile (5 to 8 rows), since the streaming kernel's float32
// blocks of 8 multiply by mma.sync again ("v30"): the warp-mma kernel beat
// the streaming and warp-dot kernels from 2 to 256 MiB (8,6-8,64,1024 3.4
// against 4.0 us; 32,6-8,128,2048 14.3-14.6 against 15.4; 64,6-8,128,8192
// 75.5-76.4 against 79.6) but at 64 MiB, where the streaming kernel kept
// #10's shape (32,5-8,128,4096 21.6-21.8 against 22.4-22.6 us). Below 2 MiB
// it was not measured: the warp-dot kernel keeps it.
constexpr int64_t kMinWarpMmaOneTileWeightFloat = int64_t{2} << 20;
constexpr int64_t kStreamOneTileWeightFloat = int64_t{64} << 20;
constexpr int64_t kStreamOneTileWeightFloatEnd = int64_t{128} << 20;
// The warp-mma kernel's layout (bench/NOTES.md, "v19"): blocks of at least
// kWarpMmaWideBlock threads where that leaves a block a multiprocessor
// (64,1,128,8192 bfloat16 37.0 -> 32.8 us); the first step's weight
// prefetched into L2 before the previous grid ends from these weights, by
// n-tiles a warp (smaller ones lost up to 0.6 us).
constexpr int kWarpMmaWideBlock = 256;
constexpr int64_t kWarpMmaPrefetchWeightOneTile = int64_t{16} << 20;
constexpr int64_t kWarpMmaPrefetchWeightTwoTiles = int64_t{32} << 20;
// 16-bit problems past one n-tile (8 rows) with more than this much weight
// ran slower through the warp-mma kernel (0.95x) and the streaming kernel
// than cat + cuBLAS (64,12-16,128,8192 and 32,16,128,16384: 128 MiB), while
// 64 MiB won (32,16,128,8192 1.10x).
constexpr int64_t kMaxFusedWeightHalfTwoTiles = int64_t{64} << 20;
// Since the streaming kernel's splits push their sums to each other
// ("v29"), it beats the warp-mma kernel in 16-bit types past one n-tile
// from 16 MiB of weight (32,16,128,2048 7.96 against 8.30 us) and past 4
// rows from 32 MiB (32,8,128,4096 10.49 against 10.99; 64,16,128,4096
// 18.93 against 20.24), up to kMaxFusedWeightHalfTwoTiles; fewer rows and
// less weight kept the warp-mma kernel (32,1,128,4096 10.33 against 10.43).
// Only where x's stage tiles ride in the streaming kernel's ring: with x in
// a slab the warp-mma kernel kept the lead ("v57", an H100: 6-16 rows over
// H of 80-112 and 13-59 MiB, 1.13-1.36x against the stream's 0.96-1.18x;
// 24,12-16,112,6144 1.00x against 1.02-1.08x).
constexpr int64_t kStreamOverWarpMmaWeightHalf = int64_t{16} << 20;
constexpr int64_t kStreamOverWarpMmaRowsHalfLarge = 4;
constexpr int64_t kStreamOverWarpMmaWeightHalfLarge = int64_t{32} << 20;
// The Hopper tensor-core kernel's tile of out (sm90/wgmma_kernel.cuh):
// 128 x 256, or 128 x 128 for float32's three-product split.
constexpr int64_t kWgmmaTileRows = 128;
constexpr int64_t kWgmmaTileCols = 256;
constexpr int64_t kWgmmaSplitTileCols = 128;
// One pass's widths, widest first, with the time a round of their tiles
// takes, in percent of a column's share of a 256-wide round
// (wgmma_fitted_tile_cols): 192-wide tiles ran 1.08-1.29x slower a column
// ("v52"), and won 5-20% where they fill the grid's rounds that much
// better. 128-wide tiles, 1.3x slower a column, lost wherever their
// rounds were chosen.
struct FittedTileCols {
  int cols;
  int64_t round_cost_percent;
};
constexpr FittedTileCols kWgmmaFittedTileCols[] = {{256, 100}, {192, 120}};
// Its contraction steps (128 bytes of each row), and the fewest a block's
// share of a tail split (tile_schedule.h) takes: writing a piece's sums (a
// tile's float32 sums, 64 or 128 KB) and adding them is then a small part
// of its time.
constexpr int64_t kWgmmaStepBytes = 128;
constexpr int kMinWgmmaTailSteps = 8;
// Where the tail split beat dealing every tile whole on the H200
// (bench/NOTES.md, "v49"): float32's three products where whole tiles
// leave at least 10% of the blocks' rounds idle, tiles of at least 64
// steps. Below, the pieces' sums cost more than the idle blocks give back;
// the half types' short tiles never gained, and one pass (half types,
// TF32) fits narrower tiles to the rounds instead ("v52").
constexpr int64_t kMinWgmmaTailIdlePercent = 10;
constexpr int64_t kMinWgmmaTailTileSteps = 64;
// Its cluster split: 128 x 128 tiles too (twice the clusters a 128 x 256
// tile would give), each block keeping at least the ring's 4 stages of a
// tile, which it holds until the cluster has added their sums.
constexpr int64_t kWgmmaClusterSplitTileCols = 128;
constexpr int64_t kMinClusterSplitSteps = 4;
// Where the split beat cat + cuBLAS on the H200 (bench/NOTES.md, "v22" to
// "v24"): contractions of R * H from 2048 below 4096 over rows four times
// the columns or more, and of 4096 over 512 rows or more (the concatenation
// is the larger share of the reference's time there), with 8 to 16 tiles or
// 33 and more; from 17 to 32 tiles (clusters of 4 or 3, the largest that
// fit at once) only a contraction of 4096 over 640 rows or more won. Longer
// contractions were not measured.
constexpr int64_t kMinClusterSplitContraction = 2048;
constexpr int64_t kClusterSplitRowsPerColumn = 4;
constexpr int64_t kClusterSplitLongContraction = 4096;
constexpr int64_t kMinClusterSplitRowsLong = 512;
constexpr int64_t kMinClusterSplitRowsLongMidTiles = 640;
constexpr int64_t kMinClusterSplitTiles = 8;
// The split, faster than in v24, also won over fewer rows ("v37"): 128 to
// 511 rows, contractions of 4096 and more, 8 to 16 tiles, K up to 1024
// (32,128,128,1024 1.22x, 64,128,128,1024 1.37x, 32,256,128,1024 1.09x;
// K = 2048 tied).
constexpr int64_t kMinClusterSplitRowsShort = 128;
constexpr int64_t kMaxClusterSplitKShort = 1024;
constexpr int64_t kMaxClusterSplitTilesShort = 16;
constexpr int64_t kMinClusterSplitMidTiles = 17;
constexpr int64_t kMaxClusterSplitMidTiles = 32;
// With out stored four columns at a time ("v39") it also won up to 32 tiles
// over 128 to 639 rows, K up to 4096, contractions of 4096 and 8192
// (32,128,128,4096 1.08x, 32,512,128,1024 1.10x, 32,384,128,1024 1.20x,
// 32,128,128,2048 1.07x, 64,128,128,4096 1.09x, 64,256,128,2048 1.11x), but
// tied over two row tiles past 1536 columns at 4096 (32,256,128,2048
// 0.99-1.00x, left to cuBLAS); fewer rows (32,64-100,128,4096 0.87-0.96x)
// and contractions of 2048 (16,256,128,2048 0.94x) lost. Over two row
// tiles at 8192 ("v41") it won only where cuBLAS's own kernel was slow
// (64,224-256,128,2048 1.10-1.13x) and lost elsewhere (64,136-240,128,2048
// 0.81-0.99x): two row tiles past 1536 columns go to cuBLAS at 8192 too.
constexpr int64_t kMaxClusterSplitMediumContraction = 8192;
constexpr int64_t kMaxClusterSplitKTwoRowTiles = 1536;
// The table's memory: the H200's HBM3e, 4.8 TB/s at its peak. On sm_90
// GPUs with slower memory (the H100's HBM3, 3.35 TB/s) the split, which
// streams the weight once a row tile, lost 3-12% to cat + cuBLAS where its
// margin on the H200 was narrow (bench/NOTES.md "v55"): a last row tile at
// most half full (32,144-192,128,1024 0.93-0.99x, 64,160,128,1024 0.88x),
// more than 32 tiles (32,640,128,1024 0.92x) and one row tile of 2048
// columns or more (32,128,128,2048 and 32,128,128,4096 0.94x). It won
// there elsewhere in the table (32,384,128,1024 1.26x, 64,128,128,1024
// 1.22x, 32,256,128,1536 1.07x).
constexpr int64_t kMeasuredMemoryGbps = 4000;
constexpr int64_t kMaxClusterSplitTilesSlowMemory = 32;
constexpr int64_t kMaxClusterSplitKOneRowTileSlowMemory = 1536;
// Where it beat cat + cuBLAS on the H200 (bench/NOTES.md, "v14"): tiles
// enough for two per multiprocessor (fewer leave most of them idle for a
// long contraction), and a weight that stays in L2 while the tiles in
// flight, spread along K, read it. At K = 16384 it lost with 16 MiB of
// weight too (v21), so K stays within what won.
// Nor where its 256-wide tiles leave more than a quarter of the blocks'
// rounds idle ("v49b": 32,2304,128,4096, 288 tiles, 27% idle, 0.83x; 25%
// and less 0.97-1.13x); 192-wide tiles, three full rounds there, lost too
// ("v52", 0.87x).
constexpr int64_t kMinWgmmaTiles = 256;
constexpr int64_t kMaxWgmmaWeightBytes = int64_t{32} << 20;
constexpr int64_t kMaxWgmmaHalfK = 4096;
constexpr int64_t kMaxWgmmaHalfIdlePercent = 25;
// Its ping-pong schedule (bench/NOTES.md, "v21") beat both cat + cuBLAS and
// the shared tiles on half-type problems of 64 tiles to one a
// multiprocessor (its 64-row tiles, twice as many, keep more of them busy)
// with up to 8 MiB of weight; with fewer tiles or more weight it lost.
constexpr int64_t kMinWgmmaPingpongTiles = 64;
constexpr int64_t kMaxWgmmaPingpongWeightBytes = int64_t{8} << 20;
// Its stationary-weight kernel keeps a 128-column tile's weight, the whole
// contraction of up to this many 64-element stages, in registers. With the
// weight there (bench/NOTES.md, "v35", "v37") it beat every other route on
// the H200 wherever it was measured past the warp-mma kernel's rows: 1 to 8
// stages, heads of 32 to 128, from 128 rows, K up to 16384.
constexpr int64_t kWgmmaStationaryTileCols = 128;
constexpr int64_t kMaxWgmmaStationarySteps = 8;
constexpr int64_t kMinWgmmaStationaryH = 32;
constexpr int64_t kMinWgmmaStationaryRows = 128;
constexpr int64_t kMaxWgmmaStationaryK = 16384;
// Its first tile's stages asked of L2 ahead won on grids of half the
// multiprocessors or fewer and where every block has this many tiles or
// more, and lost on full grids of 1 to 4 tiles a block ("v36").
constexpr int64_t kMinWgmmaStationaryL2FirstTiles = 15;
// float32's three-product instance (bench/NOTES.md, "v18") beat cat +
// cuBLAS's SIMT GEMM 1.9-2.1x from 128 of its tiles on (every weight
// measured, to 128 MiB) and 1.4-1.5x with 64; with 32 it tied or lost.
constexpr int64_t kMinWgmmaSplitTiles = 64;
// Over contractions shorter than this, it won only where its last row tile
// was at least three-quarters full; emptier ones lost to cat + cuBLAS
// (bench/NOTES.md "v56", an H100: 1,42,32,31832 0.77x, 4,26,32,9768 0.83x,
// 1,179,96,10600 0.95x; 2,100,64,8192 1.16x, 1,128,32,8192 1.09x).
constexpr int64_t kMinWgmmaSplitAnyFillContraction = 256;
constexpr int64_t kMinWgmmaSplitLastTileRowsShort = 96;
// Heads that fill less than this share of their 32-element steps (float32
// heads of 36-44 or 68) lost over two row tiles of up to this many rows,
// where cat + cuBLAS's tiles read only the heads' real width ("v68", an H100:
// 16,129-192,40,5486 0.90-0.92x, 16,140,36,4096 0.91x, 8,157,40,11439
// 0.79x, 16,140,44,5486 0.97x; H = 48 took 1.02-1.06x, 56 1.23x, 72
// 1.04-1.15x). From 193 rows cuBLAS's tiles took 1.37x as long and the
// kernel won (16,193-256,40,5486 1.19-1.23x).
constexpr int64_t kMinWgmmaStepUsePercent = 75;
constexpr int64_t kMaxWgmmaNarrowStepRows = 192;
// Such heads lost over one row tile of up to this many rows too, where cat +
// cuBLAS's tiles are narrower than the kernel's 128 rows ("v70", an H100:
// 338 problems, R 4-128, heads of 4-20, 36-44 or 68, K 8192-32768; 290
// below 0.99x, geometric mean 0.73x, heads of 4-20 0.13-0.93x, the best
// 1.16x). From 65 rows cuBLAS's tiles are as wide and the kernel won from
// K = 11440 (12,65-80,36-44,11440 1.15-1.37x).
constexpr int64_t kMaxWgmmaFewStepRows = 64;
// Up to this many rows it lost too where out's rows are not 16-byte
// aligned (K not a multiple of 4), so that the copy engine cannot store
// them, but for tiles filling two-thirds to all of one wave of the
// multiprocessors ("v57", an H100: 166 tiles, 8,36-64,64,21226-21227
// 0.64-0.82x, 16,48-64,64,21227 0.91-0.93x, where 8,48,64,21224 took 0.98x;
// 128 and 209 rows still won 1.35x and 1.61x at K = 21227; "v61", "v64":
// 96 tiles 1.11x, 128-132 1.16-1.49x, 64 0.95x; contractions from 512).
// Ahead of the row-tile kernels it never goes there.
constexpr int64_t kMaxWgmmaSplitRowsUnalignedOut = 64;
// There it also beat the streaming and warp-mma kernels, whose row tiles
// each read the weight ("v37": 8,64-128,64,16384 1.35-2.1x against their
// 0.73-1.01x; 16,128,64,16384 and 16,128,128,8192 2.3x and 1.46x against
// 0.96x and 1.27x): from 64 rows over contractions of up to 512, from 128
// rows up to 2048. Longer contractions kept the streaming kernel
// (32,96-128,128,4096).
constexpr int64_t kMaxWgmmaSplitShortContraction = 512;
constexpr int64_t kMinWgmmaSplitRowsShort = 64;
constexpr int64_t kMaxWgmmaSplitMidContraction = 2048;
constexpr int64_t kMinWgmmaSplitRowsMid = 128;
// Heads of at most a quarter of a step (float32 heads of 8 or fewer) lost
// at any row count, the kernel multiplying three zeros or more for each
// value ("v71", an H100: 4-64,128-4096,4-8,4096-32768 0.33-0.78x).
constexpr int64_t kMaxWgmmaStepUsePercentAnyRows = 25;
// Steps of whole heads (kWgmmaPacked: float32 heads of 4, 8 or 16) beat
// cat + cuBLAS over whole row tiles from this many 128 x 128 tiles where
// the contraction fills two steps, and from twice as many where it fills
// one ("v71", an H100: 117 of 243 problems, R 4-64, B 33-4096, K
// 1024-32768, 1.06-2.15x, geometric mean 1.49x; 14 of them took
// 0.33-1.22x with steps within a head). Fewer tiles, one row tile of up to
// 64 rows or a contraction shorter than a step lost (16,128,8,4096 0.99x,
// 16,256,8,1024 0.85x, 64,33,16,4096 0.90x, 4,1024,4,8192 0.95x). Rows
// past whole tiles cost the kernel a tile where cuBLAS pays for the rows
// alone: it takes them only where the tiles' rows exceed the problem's
// by at most an eighth.
constexpr int64_t kMinWgmmaPackedTiles = 64;
constexpr int64_t kMinWgmmaPackedFullSteps = 2;
constexpr int64_t kMaxWgmmaPackedPaddedRowsEighths = 1;
// Its one-pass TF32 instance, where the user allowed TF32 (bench/NOTES.md,
// "v23"), beat cat + cuBLAS under TF32 from 128 of its 128 x 256 tiles up to
// K = 4096, over the contractions (R * H from 512) and weights (to 128 MiB,
// where the lead had shrunk to 1.04x) measured; 64 tiles lost, as did
// K = 16384.
constexpr int64_t kMinWgmmaTf32Tiles = 128;
// Where out's rows are unaligned cuBLAS's TF32 GEMMs ran 1.7-2.7x slower,
// and the one pass won from 32 of its tiles ("v64", an H100: 16,256,64,4095
// 1.70x, 8,2048,64,511 1.64x) over the contractions measured (R * H from
// 256: 4,512,64,4094 1.51x) up to kMaxWgmmaTf32K; at 16 tiles and fewer it
// lost or tied (32,64,128,4095 0.84x, 32,128,128,4095 1.05x, 8,256,64,1023
// 1.03x).
constexpr int64_t kMinWgmmaTf32TilesUnalignedOut = 32;
constexpr int64_t kMinWgmmaTf32ContractionUnalignedOut = 256;
// Half types' ping-pong and shared tiles where out is unaligned: from this
// many rows (wgmma_route_for_unaligned_out).
constexpr int64_t kMinWgmmaRowsUnalignedOutHalf = 512;
constexpr int64_t kMaxWgmmaTf32K = 4096;
constexpr int64_t kMinWgmmaTf32Contraction = 512;
constexpr int64_t kMaxWgmmaTf32WeightBytes = int64_t{128} << 20;
// Where a small problem left to cuBLAS takes a fused kernel
// (small_problem_fused): up to these rows, and up to these weight bytes
// read once a tile of kSmallProblemRowsPerRead rows (from L2 past the
// first).
constexpr int64_t kMaxSmallProblemRowsHalf = 128;
constexpr int64_t kMaxSmallProblemRowsFloat = 256;
constexpr int64_t kSmallProblemRowsPerRead = 32;
constexpr int64_t kMaxSmallProblemRead = int64_t{4} << 20;
// Both, and the warp-dot kernel's long contractions
// (warp_dot_wins_long_contraction), up to the longest contraction
// measured: past it 64,27,256,56 lost in bfloat16 ("v66", an H100: 0.75x).
constexpr int64_t kMaxSmallProblemContraction = 8192;
// Of those, where x's or the weight's rows are not 16-byte vectors (H = 33),
// the warp-dot kernel reading them an element at a time, up to this many
// warps (output columns times row tiles of 4): it beat cat + cuBLAS 1.1-8x
// there and lost past them, where each warp's share of a short
// contraction is small ("v67", an H100: 3,20,33,80 2.3 us against 19.1;
// 9,128,33,128 bfloat16 0.91x at 4096 warps, 9,200,33,200 float32 0.96x at
// 10000). Half types' element-wide loads also lost to float16's cuBLAS
// past this contraction (31,8,33,1000 0.78x, 63,32,33,64 0.83x), and where
// the streaming kernel reads x from a slab, float32's from
// kShortContraction (24,205,33,32 7.6 us against the stream's 6.4;
// 12,90,33,32 2.9 against 5.8).
constexpr int64_t kMaxWarpDotWarpsNarrowHalf = 2048;
constexpr int64_t kMaxWarpDotWarpsNarrowFloat = 4096;
constexpr int64_t kMaxWarpDotNarrowContractionHalf = 512;
// float32 streams past that read, to this weight, where x's rows are
// 16-byte vectors over contractions from kShortContraction ("v66":
// 64,75,128,68 3.8x, 32,151,40,1231 2.0x, 32,237,256,328 4.0x; with H = 33
// 4,198,33,1256 lost, 0.90x).
constexpr int64_t kMaxSmallProblemWeightFloat = int64_t{16} << 20;
// A cluster's reduction costs about as much as streaming this many stages,
// plus one for each of its blocks (bench/NOTES.md "v28").
constexpr int64_t kClusterCostStages = 2;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows in the last of the tiles of `tile` rows that cover `rows`.
int64_t last_tile_rows(int64_t rows, int64_t tile) {
  return rows - (ceil_div(rows, tile) - 1) * tile;
}

// Whether a grid of `blocks` covers the GPU (kFullGridEighths).
bool covers_gpu(int64_t blocks, const Problem& p) {
  return blocks * 8 >= p.sm_count * kFullGridEighths;
}

// Whether out's rows, as the op allocates them, are whole multiples of 16
// bytes: what the copy engine needs to store them.
bool out_rows_aligned(const Problem& p) {
  return p.K * p.element_size % 16 == 0;
}

int64_t weight_bytes(const Problem& p) {
  return p.K * p.R * p.H * p.element_size;
}

// Stages of 64 elements of one head the half types' contraction takes.
int64_t wgmma_half_steps(const Problem& p) { return ceil_div(p.H, 64) * p.R; }

// Rows of B per block: the kernel's instances by element size. The tensor
// cores take n8 tiles (float16, bfloat16, float32); the CUDA cores hold
// kRows x 4 accumulators per lane (float64, and float32 below 8 rows, where
// the tensor cores would mostly multiply zeros).
int rows_per_block(int element_size, int64_t B) {
  switch (element_size) {
    case 2:
      return B <= 8 ? 8 : B <= 16 ? 16 : 32;
    case 4:
      return B <= 4 ? 4 : B <= 8 ? 8 : B <= 16 ? 16 : 32;
    default:
      return B <= 4 ? 4 : 8;
  }
}

// Whether the streaming kernel's x tiles can ride in its ring (TMA from x
// in place, each stage inside one head).
bool stream_x_fits_ring(const Problem& p) {
  return p.x_tma_ok && p.H % (stream::kStageBytes / p.element_size) == 0;
}

// Rows of B up to which the measured table streams float32 `p`.
int64_t max_stream_rows_float(const Problem& p) {
  if (p.R * p.H < kShortContraction) return kMaxShortStreamRowsFloat;
  if (p.tf32_allowed) return kMaxStreamRowsFloatTf32;
  const int64_t weight = weight_bytes(p);
  if (weight < kMaxStreamWeightFloatMid) return kMaxStreamRowsFloatMid;
  if (weight < kMaxStreamWeightFloatLarge) return kMaxStreamRowsFloatLarge;
  return kMaxStreamRowsFloat;
}

// The blocks of a streaming plan's grid.
int64_t stream_blocks(const StreamPlan& plan) {
  return plan.column_tiles * plan.row_tiles * plan.splits;
}

// Whether a float32 streaming plan's blocks, over several row tiles, each
// stream a short stretch alone after their slabs, in more waves than such
// blocks won in.
bool stream_float_short_slabs_lose(const Problem& p, const StreamPlan& plan) {
  return p.element_size == 4 && plan.row_tiles > 1 && !plan.x_in_ring &&
         plan.splits == 1 &&
         plan.stages_per_split <= kMaxStreamSlabStagesFloatManyWaves &&
         stream_blocks(plan) > kMaxStreamSlabWavesFloatShort * p.sm_count;
}

// Whether the measured table streams float32 `p`.
bool stream_takes_float(const Problem& p) {
  return p.B <= max_stream_rows_float(p) &&
         weight_bytes(p) >= kMinFloatWeightBytes;
}

// The streaming plan the measured table takes for float32 `p`, or none.
std::optional<StreamPlan> stream_plan_float(const Problem& p) {
  if (!stream_takes_float(p)) return std::nullopt;
  auto plan = plan_stream(p);
  if (!plan || plan->row_tiles == 1) return plan;
  if (stream_blocks(*plan) > kMaxStreamWavesFloatRowTiles * p.sm_count) {
    return std::nullopt;
  }
  return plan;
}

// The streaming plan the measured table takes for 16-bit problems of 17 to
// 32 rows (one row tile of 32), or none: its grid decides, so the verdict is
// the plan itself.
std::optional<StreamPlan> stream_plan_half_large(const Problem& p) {
  if (p.B <= kMaxStreamRowsHalf || p.B > kMaxStreamRowsHalfLarge ||
      weight_bytes(p) < kMinStreamWeightHalfLarge || !stream_x_fits_ring(p)) {
    return std::nullopt;
  }
  auto plan = plan_stream(p);
  if (!plan) return std::nullopt;
  const int64_t blocks = stream_blocks(*plan);
  if (blocks > p.sm_count ||
      blocks * 100 < p.sm_count * kMinStreamGridPercentHalfLarge) {
    return std::nullopt;
  }
  return plan;
}

// The measured table's verdict for the streaming kernel on 16-bit problems
// past 32 rows.
bool stream_wins_half_long(const Problem& p) {
  const int64_t row_tiles = ceil_div(p.B, rows_per_block(2, p.B));
  return p.B > kMaxStreamRowsHalfLarge && p.B <= kMaxStreamRowsHalfLong &&
         (stream_x_fits_ring(p) || p.K <= kMaxStreamColumnsHalfLongSlab) &&
         wgmma_half_steps(p) > kMaxWgmmaStationarySteps &&
         row_tiles * weight_bytes(p) <= kMaxStreamReadHalfLong;
}

// The streaming plan the measured table takes for `p`, or none; planned
// only where the table streams (the call's host-side cost).
std::optional<StreamPlan> stream_plan_by_table(const Problem& p) {
  switch (p.element_size) {
    case 2:
      if (p.B <= kMaxStreamRowsHalf || stream_wins_half_long(p)) {
        return plan_stream(p);
      }
      return stream_plan_half_large(p);
    case 4:
      return stream_plan_float(p);
    default:
      return std::nullopt;
  }
}

// The warp-dot kernel's row tiles: each reads the whole weight.
int64_t warp_dot_row_tiles(const Problem& p) {
  return ceil_div(p.B, warp_dot::rows_per_warp(p.B));
}

// The measured table's verdict for the warp-dot kernel on the H200.
bool warp_dot_wins(const Problem& p) {
  const int64_t row_tiles = warp_dot_row_tiles(p);
  const int64_t read = weight_bytes(p) * row_tiles;
  switch (p.element_size) {
    case 2:
      return read <= kWarpDotMaxReadHalf &&
             p.K * row_tiles <= kWarpDotMaxWarpsHalf;
    case 4:
      return read <= kWarpDotMaxReadFloat ||
             (p.B <= 2 && p.R * p.H >= kShortContraction &&
              (p.B == 1 || read <= kWarpDotMaxReadFloatTwoRows));
    default:
      return read <= kWarpDotMaxReadDouble;
  }
}

// Whether the warp-dot kernel takes `p` past its read bound: few warps over
// a long contraction, the weight in L2 (kWarpDotMaxWarpsLongContraction).
bool warp_dot_wins_long_contraction(const Problem& p) {
  return p.element_size <= 4 && p.B > kMinWarpDotRowsLongContraction &&
         p.R * p.H >= kWarpDotLongContraction &&
         p.R * p.H <= kMaxSmallProblemContraction &&
         p.K * warp_dot_row_tiles(p) <= kWarpDotMaxWarpsLongContraction &&
         weight_bytes(p) <= kWarpDotMaxWeightLongContraction;
}

// The measured table's verdict for the warp-mma kernel on the H200.
bool warp_mma_wins(const Problem& p) {
  const int64_t weight = weight_bytes(p);
  if (p.K < kMinWarpMmaColumns) {
    return p.element_size == 2 && p.B > kMaxStreamRowsHalfLarge &&
           p.B * p.K <= kMaxWarpMmaOutputsFewColumns &&
           p.R * p.H <= kMaxWarpMmaContractionFewColumns &&
           weight <= kWarpMmaMaxWeightManyTiles;
  }
  const int64_t rows_per_pass =
      int64_t{warp_mma::kRowsPerTile} * warp_mma::kMaxRowTiles;
  if (p.element_size == 4) {
    // Under TF32 cuBLAS takes one pass, this kernel still three.
    if (p.tf32_allowed) return false;
    if (p.R * p.H < kMinWarpMmaContractionFloat) {
      if (p.B > kMaxWarpMmaRowsShortFloat) {
        return p.B <= kMaxWarpMmaRowsShortFloatLight &&
               weight < kMaxWarpMmaWeightShortFloatLight;
      }
      return p.B >= 2 && weight >= kMinFloatWeightBytes;
    }
    if (p.B > warp_mma::kRowsPerTile / 2 && p.B <= warp_mma::kRowsPerTile) {
      // The streaming kernel's copies of several stages overtook it where
      // its grid covered the multiprocessors ("v45": 128 blocks or more; the
      // 96 of a three-way split at K = 2048 were not measured).
      if (const auto plan = plan_stream(p);
          plan && plan->copy_stages > 1 &&
          covers_gpu(stream_blocks(*plan), p)) {
        return false;
      }
      return weight >= kMinWarpMmaOneTileWeightFloat &&
             (weight < kStreamOneTileWeightFloat ||
              weight >= kStreamOneTileWeightFloatEnd);
    }
    if (p.B <= rows_per_pass || p.B > kMaxWarpMmaRowsFloat ||
        weight > kWarpMmaMaxWeightFloat) {
      return false;
    }
    if (p.B <= kMaxStreamRowsFloat && weight >= kStreamOverWarpMmaWeightFloat) {
      return false;
    }
    // Since x's TF32 parts are split by warps of their own ("v43"), the
    // streaming kernel wins past 16 rows wherever its table takes the
    // problem, x rides in its ring and the contraction is at least
    // kShortContraction long; at 256 it lost.
    if (stream_takes_float(p) && p.R * p.H >= kShortContraction &&
        stream_x_fits_ring(p)) {
      return false;
    }
    // Past 64 rows the streaming kernel wins wherever the table takes it.
    if (p.B > kMaxStreamRowsFloat && p.B <= max_stream_rows_float(p)) {
      return false;
    }
    return p.B <= 2 * rows_per_pass || p.B > kMaxStreamRowsFloat ||
           weight <= kWarpMmaStreamWeightFloat ||
           p.R * p.H >= kWarpMmaLongContraction;
  }
  if (p.element_size != 2) return false;
  if (p.B >= 2 && p.B <= 4 && weight <= kWarpDotMaxReadHalf) {
    return false;
  }
  // Past 64 MiB only where cuBLAS would store out's rows slowly.
  const bool cublas_decode_slow =
      p.B > warp_mma::kRowsPerTile && !out_rows_aligned(p);
  if ((weight <= kMaxFusedWeightHalfTwoTiles || cublas_decode_slow) &&
      stream_x_fits_ring(p) &&
      ((p.B > warp_mma::kRowsPerTile &&
        weight >= kStreamOverWarpMmaWeightHalf) ||
       (p.B > kStreamOverWarpMmaRowsHalfLarge &&
        weight >= kStreamOverWarpMmaWeightHalfLarge))) {
    return false;
  }
  return p.B <= rows_per_pass ||
         (p.B <= 2 * rows_per_pass && weight <= kWarpMmaMaxWeightTwoTiles) ||
         (p.B <= kWarpMmaMaxRowsHalf && weight <= kWarpMmaMaxWeightManyTiles);
}

// The measured table's verdict for cat + cuBLAS over the fused decode
// kernels: 16-bit, two n-tiles, a very large weight, out rows cuBLAS stores
// fast ("v64": where they are unaligned, 64,16,128,8191 161 us against the
// streaming kernel's 48).
bool cublas_wins_half_decode(const Problem& p) {
  return p.element_size == 2 && p.B > warp_mma::kRowsPerTile &&
         weight_bytes(p) > kMaxFusedWeightHalfTwoTiles && out_rows_aligned(p);
}

// Whether the Hopper tensor-core kernel multiplies `p` as float32's three
// TF32 products; else in one pass (half types, TF32).
bool wgmma_three_products(const Problem& p) {
  return p.element_size == 4 && !p.tf32_allowed;
}

// Tiles of out the Hopper tensor-core kernel covers `p` with, `cols`
// columns wide, and in its instance's own width: 128 for float32's
// three-product split, 256 for the others.
int64_t wgmma_tiles(const Problem& p, int64_t cols) {
  return ceil_div(p.B, kWgmmaTileRows) * ceil_div(p.K, cols);
}
int64_t wgmma_tiles(const Problem& p) {
  return wgmma_tiles(
      p, wgmma_three_products(p) ? kWgmmaSplitTileCols : kWgmmaTileCols);
}

// The share of the rounds, in percent and rounded down, that a persistent
// grid of up to `sm_count` blocks leaves idle dealing `tiles` whole.
int64_t idle_percent(int64_t tiles, int sm_count) {
  const int64_t blocks = std::min<int64_t>(tiles, sm_count);
  if (blocks <= 0) return 0;
  const int64_t slots = ceil_div(tiles, blocks) * blocks;
  return 100 * (slots - tiles) / slots;
}

}  // namespace

int wgmma_fitted_tile_cols(const Problem& p) {
  int best = 0;
  int64_t best_cost = 0;
  for (const auto [cols, round_cost_percent] : kWgmmaFittedTileCols) {
    const int64_t tiles = wgmma_tiles(p, cols);
    const int64_t blocks =
        std::max<int64_t>(1, std::min<int64_t>(tiles, p.sm_count));
    const int64_t cost = ceil_div(tiles, blocks) * cols * round_cost_percent;
    if (best == 0 || cost < best_cost) {
      best = cols;
      best_cost = cost;
    }
  }
  return best;
}

namespace {

// Whether float32 under TF32 lies where the one pass was measured to win:
// from `min_tiles` of its tiles and `min_contraction`, up to
// kMaxWgmmaTf32K and kMaxWgmmaTf32WeightBytes.
bool wgmma_tf32_measured(const Problem& p, int64_t min_tiles,
                         int64_t min_contraction) {
  return wgmma_tiles(p) >= min_tiles && p.K <= kMaxWgmmaTf32K &&
         p.R * p.H >= min_contraction &&
         weight_bytes(p) <= kMaxWgmmaTf32WeightBytes;
}

// Whether a head fills at least kMinWgmmaStepUsePercent of float32's
// three-product steps (kWgmmaStepBytes of a head each, the last one
// zero-filled past its end).
bool wgmma_steps_mostly_full(const Problem& p) {
  const int64_t step = kWgmmaStepBytes / p.element_size;
  return 100 * p.H >= kMinWgmmaStepUsePercent * ceil_div(p.H, step) * step;
}

// Whether float32's three products, where the measured table takes them,
// lose to cat + cuBLAS all the same: heads that leave most of their steps
// empty over up to kMaxWgmmaFewStepRows rows, or over two row tiles of up
// to kMaxWgmmaNarrowStepRows, and heads of at most
// kMaxWgmmaStepUsePercentAnyRows of a step over any rows (where steps of
// whole heads do not win, taking_wgmma_by_table). There the streaming and
// warp-mma kernels lost too ("v66": 16,157,40,5486 0.76x and 0.89x; "v70": the
// stream 0.51-0.93x over 33-64 rows from K = 16384).
bool wgmma_steps_left_empty(const Problem& p) {
  const int64_t step = kWgmmaStepBytes / p.element_size;
  return wgmma_three_products(p) && !wgmma_steps_mostly_full(p) &&
         (p.B <= kMaxWgmmaFewStepRows ||
          (p.B > kWgmmaTileRows && p.B <= kMaxWgmmaNarrowStepRows) ||
          100 * p.H <= kMaxWgmmaStepUsePercentAnyRows * step);
}

// Whether float32's three products over steps of whole heads
// (can_run_wgmma_packed) beat cat + cuBLAS: a row tile or more, padded by
// at most kMaxWgmmaPackedPaddedRowsEighths of the rows, and
// kMinWgmmaPackedTiles tiles where the contraction fills
// kMinWgmmaPackedFullSteps steps, twice as many where it fills one. x in
// the concatenation's own order keeps cuBLAS over its view, which the table
// did not measure against it.
bool wgmma_packed_wins(const Problem& p) {
  const int64_t padding = kWgmmaTileRows - last_tile_rows(p.B, kWgmmaTileRows);
  if (!wgmma_three_products(p) || p.x_gathered_view || p.B < kWgmmaTileRows ||
      8 * padding > kMaxWgmmaPackedPaddedRowsEighths * p.B) {
    return false;
  }
  const int64_t full_steps = p.R * p.H * p.element_size / kWgmmaStepBytes;
  const int64_t tiles = wgmma_tiles(p);
  return full_steps >= kMinWgmmaPackedFullSteps
             ? tiles >= kMinWgmmaPackedTiles
             : full_steps >= 1 && tiles >= 2 * kMinWgmmaPackedTiles;
}

// Whether float32's three products would store `p`'s few rows of out
// themselves (kMaxWgmmaSplitRowsUnalignedOut).
bool few_rows_out_unaligned(const Problem& p) {
  return p.B <= kMaxWgmmaSplitRowsUnalignedOut && !out_rows_aligned(p);
}

// Whether a small problem whose rows are not 16-byte vectors
// (small_problem_fused) takes the warp-dot kernel's element-wide loads.
bool narrow_warp_dot_wins(const Problem& p) {
  if (p.x_vectors && p.weight_tma_ok) return false;
  const bool half = p.element_size == 2;
  const int64_t C = p.R * p.H;
  if (p.K * warp_dot_row_tiles(p) >
          (half ? kMaxWarpDotWarpsNarrowHalf : kMaxWarpDotWarpsNarrowFloat) ||
      (half && C > kMaxWarpDotNarrowContractionHalf)) {
    return false;
  }
  return !p.weight_tma_ok || (!half && C < kShortContraction);
}

// The measured table's verdict for the Hopper tensor-core kernel: half
// types; float32 through its three TF32 products; float32 where TF32 is
// allowed through its one-pass instance.
bool wgmma_wins(const Problem& p) {
  if (p.element_size == 4) {
    if (p.tf32_allowed) {
      return wgmma_tf32_measured(p, kMinWgmmaTf32Tiles,
                                 kMinWgmmaTf32Contraction);
    }
    const int64_t tiles = wgmma_tiles(p);
    if (few_rows_out_unaligned(p) &&
        (tiles > p.sm_count || 3 * tiles < 2 * p.sm_count ||
         p.R * p.H < kShortContraction)) {
      return false;
    }
    return tiles >= kMinWgmmaSplitTiles &&
           (p.R * p.H >= kMinWgmmaSplitAnyFillContraction ||
            last_tile_rows(p.B, kWgmmaTileRows) >=
                kMinWgmmaSplitLastTileRowsShort);
  }
  return p.element_size == 2 && wgmma_tiles(p) >= kMinWgmmaTiles &&
         p.K <= kMaxWgmmaHalfK && weight_bytes(p) <= kMaxWgmmaWeightBytes &&
         idle_percent(wgmma_tiles(p), p.sm_count) <= kMaxWgmmaHalfIdlePercent;
}

// The measured table's verdict for float32's three TF32 products over the
// streaming and warp-mma kernels.
bool wgmma_float_wins_over_row_tiles(const Problem& p) {
  const int64_t C = p.R * p.H;
  const bool rows_enough =
      C <= kMaxWgmmaSplitShortContraction
          ? p.B >= kMinWgmmaSplitRowsShort
          : C <= kMaxWgmmaSplitMidContraction && p.B >= kMinWgmmaSplitRowsMid;
  return wgmma_three_products(p) && rows_enough && !few_rows_out_unaligned(p) &&
         wgmma_wins(p);
}

// Tiles of out the split schedule covers `p` with.
int64_t wgmma_split_tiles(const Problem& p) {
  return ceil_div(p.B, kWgmmaTileRows) *
         ceil_div(p.K, kWgmmaClusterSplitTileCols);
}

// The measured table's verdict for its cluster split (v22 to v39).
bool wgmma_split_wins(const Problem& p) {
  const int64_t tiles = wgmma_split_tiles(p);
  const bool mid_tiles =
      tiles >= kMinClusterSplitMidTiles && tiles <= kMaxClusterSplitMidTiles;
  const int64_t C = p.R * p.H;
  const bool rows_enough =
      C == kClusterSplitLongContraction
          ? p.B >= (mid_tiles ? kMinClusterSplitRowsLongMidTiles
                              : kMinClusterSplitRowsLong)
          : !mid_tiles && C >= kMinClusterSplitContraction &&
                C < kClusterSplitLongContraction &&
                p.B >= kClusterSplitRowsPerColumn * p.K;
  const bool short_rows =
      C >= kClusterSplitLongContraction && p.B >= kMinClusterSplitRowsShort &&
      p.B < kMinClusterSplitRowsLong && p.K <= kMaxClusterSplitKShort &&
      tiles <= kMaxClusterSplitTilesShort;
  // Two row tiles past 1536 columns, which cuBLAS ties or wins over
  // medium_rows' contractions.
  const bool cublas_ties =
      ceil_div(p.B, kWgmmaTileRows) == 2 && p.K > kMaxClusterSplitKTwoRowTiles;
  const bool medium_rows = C >= kClusterSplitLongContraction &&
                           C <= kMaxClusterSplitMediumContraction &&
                           p.B >= kMinClusterSplitRowsShort &&
                           p.B < kMinClusterSplitRowsLongMidTiles &&
                           tiles <= kMaxClusterSplitMidTiles && !cublas_ties;
  return p.element_size == 2 && (rows_enough || short_rows || medium_rows) &&
         tiles >= kMinClusterSplitTiles;
}

// Whether the split keeps the margin the table took it for on this GPU's
// memory: always on memory as fast as the H200's, and where cuBLAS stores
// out slowly (its margin there is far wider).
bool wgmma_split_margin_holds(const Problem& p) {
  if (p.memory_gbps >= kMeasuredMemoryGbps || !out_rows_aligned(p)) {
    return true;
  }
  return wgmma_split_tiles(p) <= kMaxClusterSplitTilesSlowMemory &&
         last_tile_rows(p.B, kWgmmaTileRows) > kWgmmaTileRows / 2 &&
         (p.B > kWgmmaTileRows || p.K <= kMaxClusterSplitKOneRowTileSlowMemory);
}

// The measured table's verdict for its ping-pong schedule (v21).
bool wgmma_pingpong_wins(const Problem& p) {
  const int64_t tiles = wgmma_tiles(p);
  return p.element_size == 2 && tiles >= kMinWgmmaPingpongTiles &&
         tiles <= p.sm_count && weight_bytes(p) <= kMaxWgmmaPingpongWeightBytes;
}

// The Hopper schedule the measured table takes for a problem whose out
// rows cuBLAS stores slowly (unaligned), or none. Under TF32, the one-pass
// instance from kMinWgmmaTf32TilesUnalignedOut tiles. cuBLAS's
// half-type GEMMs ran 2.6-7x slower there ("v62", an H100: 32,512,128,4095
// 192 us against 28 at K = 4096, 16,512,128,2047 74 against 14), and every
// Hopper schedule that could run beat them: the cluster split
// (16,256,64,4095 3.9x, 16,512,128,2047 5.4x, 32,128,128,4095 4.0x), else
// the ping-pong schedule where its 64-row tiles fit the multiprocessors
// (32,512,128,4095 4.4x, against the shared tiles' 4.2x), else the shared
// tiles (32,1024,128,4095 6.5x, against ping-pong's 4.3x). Those two
// schedules won from kMinWgmmaRowsUnalignedOutHalf rows; over fewer they
// lost to cat + cuBLAS ("v66", an H100: 16,157,40,5486 ping-pong 0.70x,
// 3,54,80,3814 0.79x).
std::optional<Route> wgmma_route_for_unaligned_out(const Problem& p) {
  if (out_rows_aligned(p)) return std::nullopt;
  if (p.element_size == 4 && p.tf32_allowed && can_run_wgmma(p) &&
      wgmma_tf32_measured(p, kMinWgmmaTf32TilesUnalignedOut,
                          kMinWgmmaTf32ContractionUnalignedOut)) {
    return Route::kWgmma;
  }
  if (p.element_size != 2) return std::nullopt;
  if (can_run_wgmma_split(p)) return Route::kWgmmaSplit;
  if (p.B < kMinWgmmaRowsUnalignedOutHalf) return std::nullopt;
  if (2 * wgmma_tiles(p) <= p.sm_count && can_run_wgmma_pingpong(p)) {
    return Route::kWgmmaPingpong;
  }
  if (can_run_wgmma(p)) return Route::kWgmma;
  return std::nullopt;
}

// Whether a problem the table leaves to cuBLAS is small enough for the
// fused kernels all the same: its weight in L2, few rows, float32 (not
// TF32) or a half type. There cat + cuBLAS took 5-40 times a launch
// ("v65"), and the streaming kernel, which reads x from a slab where its
// rows are not 16-byte vectors, beat it 1.3-4.5x in float32 and up to 1.8x
// in half types ("v66", an H100: 12,90,33,32 float32 5.9 us against 23,
// 4,23,256,200 bfloat16 3.6 against 6.5; 8,120,33,64 bfloat16 tied); past
// 128 rows, half types' margin fell to 1.03x (4,161,64,2380). Over contractions
// shorter than kShortContraction the warp-mma kernel's three products beat it
// in float32 (3,142,80,184 3.5 against 7.0 us, 8,88,32,387 3.9 against 5.6).
bool small_problem_fused(const Problem& p) {
  const bool half = p.element_size == 2;
  if (!half && (p.element_size != 4 || p.tf32_allowed)) return false;
  if (p.x_gathered_view || p.R * p.H > kMaxSmallProblemContraction ||
      p.B > (half ? kMaxSmallProblemRowsHalf : kMaxSmallProblemRowsFloat)) {
    return false;
  }
  const int64_t weight = weight_bytes(p);
  return weight * ceil_div(p.B, kSmallProblemRowsPerRead) <=
             kMaxSmallProblemRead ||
         (!half && p.x_vectors && p.R * p.H >= kShortContraction &&
          weight <= kMaxSmallProblemWeightFloat);
}

// The measured table's verdict for its stationary-weight kernel (v35, v37).
bool wgmma_stationary_wins(const Problem& p) {
  return p.element_size == 2 &&
         wgmma_half_steps(p) <= kMaxWgmmaStationarySteps &&
         p.H >= kMinWgmmaStationaryH && p.B >= kMinWgmmaStationaryRows &&
         p.K <= kMaxWgmmaStationaryK;
}

detail::ForcedRoute<Route> g_forced_route;

// The choices: a route alone, or a fused kernel with its plan.
RouteChoice taking(Route route) {
  RouteChoice choice;
  choice.route = route;
  return choice;
}
RouteChoice taking(const WarpDotPlan& plan) {
  RouteChoice choice = taking(Route::kWarpDot);
  choice.warp_dot = plan;
  return choice;
}
RouteChoice taking(const WarpMmaPlan& plan) {
  RouteChoice choice = taking(Route::kWarpMma);
  choice.warp_mma = plan;
  return choice;
}
RouteChoice taking(const StreamPlan& plan) {
  RouteChoice choice = taking(Route::kStream);
  choice.stream = plan;
  return choice;
}
// The Hopper tensor-core kernel's default schedule: one pass (half types,
// TF32) in narrower tiles where those fit the grid's rounds better,
// float32's three products with their tail split where it cuts one.
RouteChoice taking_wgmma(const Problem& p) {
  RouteChoice choice = taking(Route::kWgmma);
  if (wgmma_three_products(p)) {
    choice.wgmma_tail = plan_wgmma_tail(p);
  } else if (const int cols = wgmma_fitted_tile_cols(p);
             cols != kWgmmaTileCols) {
    choice.wgmma_tile_cols = cols;
  }
  return choice;
}

// Where the table takes the Hopper kernel: steps of whole heads where those
// win, else its default schedule, unless float32's steps would be left
// mostly empty, where `fallback` wins.
RouteChoice taking_wgmma_by_table(const Problem& p, Route fallback) {
  if (wgmma_packed_wins(p) && can_run_wgmma_packed(p)) {
    return taking(Route::kWgmmaPacked);
  }
  return wgmma_steps_left_empty(p) ? taking(fallback) : taking_wgmma(p);
}

// In place of a float32 stream whose short slabs lose
// (stream_float_short_slabs_lose): the Hopper kernel's three products where
// the heads fill most of their steps, else cat + cuBLAS ("v69", an H100:
// heads of 48-100 1.03-1.28x, of 36-44 0.83-0.98x).
RouteChoice taking_past_short_slabs(const Problem& p, Route fallback) {
  return wgmma_steps_mostly_full(p) && can_run_wgmma(p) ? taking_wgmma(p)
                                                        : taking(fallback);
}

}  // namespace

const char* route_name(Route route) {
  switch (route) {
    case Route::kWarpDot:
      return "warp-dot";
    case Route::kWarpMma:
      return "warp-mma";
    case Route::kStream:
      return "stream";
    case Route::kWgmma:
      return "wgmma";
    case Route::kWgmmaPingpong:
      return "wgmma-pingpong";
    case Route::kWgmmaSplit:
      return "wgmma-split";
    case Route::kWgmmaStationary:
      return "wgmma-stationary";
    case Route::kWgmmaPacked:
      return "wgmma-packed";
    case Route::kTiled:
      return "tiled";
    case Route::kCublasView:
      return "cublas-view";
    case Route::kCublasCat:
      return "cublas-cat";
  }
  return "?";
}

std::optional<WarpDotPlan> plan_warp_dot(const Problem& p) {
  const int64_t C = p.R * p.H;
  if (!p.rows_contiguous || C <= 0 || C > INT32_MAX / 2 || p.B <= 0 ||
      p.K <= 0 || p.sm_count <= 0) {
    return std::nullopt;
  }
  WarpDotPlan plan;
  plan.rows_per_warp = warp_dot::rows_per_warp(p.B);
  plan.vector_bytes =
      p.weight_tma_ok && p.x_vectors ? warp_dot::kVectorBytes : p.element_size;
  plan.row_tiles = ceil_div(p.B, plan.rows_per_warp);
  if (plan.row_tiles > 65535) return std::nullopt;
  // A warp's step along the contraction: 32 lanes of one vector.
  const int64_t step = 32 * (plan.vector_bytes / p.element_size);
  const int64_t unit =
      step * warp_dot::unroll(plan.rows_per_warp, plan.vector_bytes);
  // Warps split a column's contraction (a power of two of them, each at
  // least one unrolled step long) until every multiprocessor has
  // kWarpDotWarpsPerSm warps.
  const int64_t warps = p.K * plan.row_tiles;
  plan.splits = 1;
  while (plan.splits < warp_dot::kMaxSplits &&
         plan.splits * 2 <= ceil_div(C, unit) &&
         warps * plan.splits < int64_t{kWarpDotWarpsPerSm} * p.sm_count) {
    plan.splits *= 2;
  }
  plan.slice = ceil_div(ceil_div(C, plan.splits), step) * step;
  plan.threads = std::max(warp_dot::kMinThreads, 32 * plan.splits);
  plan.column_tiles = ceil_div(p.K, plan.threads / 32 / plan.splits);
  if (plan.column_tiles > INT32_MAX) return std::nullopt;
  return plan;
}

std::optional<WarpMmaPlan> plan_warp_mma(const Problem& p) {
  const int64_t C = p.R * p.H;
  // mma.sync on 16-bit types needs sm_80; float32's TF32 split, sm_90.
  const int min_arch = p.element_size == 4 ? 90 : 80;
  if (p.arch < min_arch || (p.element_size != 2 && p.element_size != 4) ||
      !p.weight_tma_ok || !p.x_vectors || C <= 0 || C > INT32_MAX / 2 ||
      p.B <= 0 || p.K <= 0 || p.sm_count <= 0) {
    return std::nullopt;
  }
  WarpMmaPlan plan;
  plan.row_tiles_per_warp = warp_mma::row_tiles_per_warp(p.B);
  plan.row_tiles =
      ceil_div(p.B, int64_t{warp_mma::kRowsPerTile} * plan.row_tiles_per_warp);
  if (plan.row_tiles > 65535) return std::nullopt;
  // Warps split a group's contraction (a power of two of them, each at least
  // one unrolled step long) while all of them stay resident at once:
  // kWarpDotWarpsPerSm warps a multiprocessor, the threads its registers
  // hold (more leave a second wave behind the first).
  const int64_t chunk = warp_mma::chunk(p.element_size);
  const int64_t unit = chunk * warp_mma::kUnroll;
  const int64_t warps = ceil_div(p.K, warp_mma::kColumns) * plan.row_tiles;
  plan.splits = 1;
  while (plan.splits < warp_mma::kMaxSplits &&
         plan.splits * 2 <= ceil_div(C, unit) &&
         warps * plan.splits * 2 <= int64_t{kWarpDotWarpsPerSm} * p.sm_count) {
    plan.splits *= 2;
  }
  plan.slice = ceil_div(ceil_div(C, plan.splits), chunk) * chunk;
  plan.threads = std::max(warp_mma::kMinThreads, 32 * plan.splits);
  // 16-bit types: blocks of several groups where the grid still has a block
  // for every multiprocessor, and a large weight's first step asked of L2
  // before the grid before this one has finished (float32 lost 1-2% with
  // both).
  const bool half = p.element_size == 2;
  if (half && plan.threads < kWarpMmaWideBlock) {
    const int64_t groups_per_block = kWarpMmaWideBlock / (32 * plan.splits);
    const int64_t blocks =
        ceil_div(ceil_div(p.K, warp_mma::kColumns), groups_per_block) *
        plan.row_tiles;
    if (blocks >= p.sm_count) plan.threads = kWarpMmaWideBlock;
  }
  plan.prefetch_first_step =
      half && weight_bytes(p) >= (plan.row_tiles_per_warp == 1
                                      ? kWarpMmaPrefetchWeightOneTile
                                      : kWarpMmaPrefetchWeightTwoTiles);
  plan.column_tiles = ceil_div(
      p.K, int64_t{warp_mma::kColumns} * (plan.threads / 32 / plan.splits));
  if (plan.column_tiles > INT32_MAX) return std::nullopt;
  return plan;
}

std::optional<StreamPlan> plan_stream(const Problem& p) {
  const int64_t C = p.R * p.H;
  if (p.arch != kStreamArch || !p.weight_tma_ok || C <= 0 || p.B <= 0 ||
      p.K <= 0 || p.sm_count <= 0 || C > INT32_MAX || p.K > INT32_MAX) {
    return std::nullopt;
  }
  const int e = p.element_size;
  const int acc_size = e == 8 ? 8 : 4;
  const int64_t stage_c = stream::kStageBytes / e;
  const int64_t total_stages = ceil_div(C, stage_c);
  StreamPlan best;
  best.rows_per_block = rows_per_block(e, p.B);
  best.column_tiles = ceil_div(p.K, stream::kCols);
  best.row_tiles = ceil_div(p.B, best.rows_per_block);
  if (best.column_tiles > 65535 || best.row_tiles > 65535) return std::nullopt;
  // Shared memory of a multiprocessor: the per-block limit plus the 1 KB the
  // hardware reserves per block.
  const int64_t sm_smem = p.max_smem_per_block + 1024;
  const int groups = stream::consumer_groups(e, best.rows_per_block);
  best.x_in_ring = stream::uses_tensor_cores(e, best.rows_per_block) &&
                   stream_x_fits_ring(p);
  const int64_t slot =
      stream::slot_bytes(e, best.rows_per_block, best.x_in_ring) +
      stream::slot_barrier_bytes(e, best.rows_per_block, best.x_in_ring);
  std::pair<bool, int64_t> best_cost{true, INT64_MAX};
  for (int splits = 1; splits <= stream::kMaxClusterSplits; ++splits) {
    const int64_t per_split = ceil_div(total_stages, splits);
    if (splits > 1 && (splits - 1) * per_split >= total_stages) continue;
    // 16 bytes of padding per slab row keep ldmatrix free of bank conflicts.
    const int64_t pitch = best.x_in_ring ? 0 : per_split * stage_c + 16 / e;
    const int64_t blocks = best.column_tiles * best.row_tiles * splits;
    const int64_t fixed = stream::smem_bytes(0, best.rows_per_block, pitch, e,
                                             acc_size, best.x_in_ring, splits);
    const auto ring_within = [&](int64_t budget) {
      return std::min<int64_t>(
          {kMaxRingStages, per_split, (budget - fixed) / slot});
    };
    // The consumer groups take stages in turn: a ring that cycles holds a
    // multiple of them, so that each slot serves one group
    // (stream_kernel.cuh).
    const auto cycling = [&](int64_t ring) {
      return ring < per_split ? ring - ring % groups : ring;
    };
    const int64_t min_ring = std::min<int64_t>(kMinRingStages, per_split);
    // Two blocks per multiprocessor where there are that many blocks, their
    // registers allow it and their rings fit; else one block with the whole
    // shared memory.
    const int per_sm_registers =
        stream::blocks_per_multiprocessor(e, best.rows_per_block);
    const int64_t half_ring = cycling(ring_within(sm_smem / 2 - 1024));
    const bool rings_share = per_sm_registers > 1 && half_ring >= min_ring;
    const int64_t ring = blocks > p.sm_count && rings_share
                             ? half_ring
                             : cycling(ring_within(p.max_smem_per_block));
    if (ring < min_ring) continue;
    // The blocks resident at once: as many a multiprocessor as registers
    // and shared memory allow, and no more than whole clusters fill.
    const int64_t smem =
        stream::smem_bytes(static_cast<int>(ring), best.rows_per_block, pitch,
                           e, acc_size, best.x_in_ring, splits);
    const int64_t per_sm =
        std::min<int64_t>(per_sm_registers, sm_smem / (smem + 1024));
    const int64_t clusters = p.stream_clusters[1] > 0
                                 ? p.stream_clusters[splits]
                                 : p.sm_count / splits;
    if (clusters <= 0) continue;  // a cluster of this size never fits
    const int64_t resident =
        std::min(int64_t{p.sm_count}, clusters * splits) * per_sm;
    // Each wave of resident blocks streams its stages, the busiest
    // multiprocessor this many.
    const int64_t waves = ceil_div(blocks, resident);
    // Clusters in a second wave wait for whole groups of multiprocessors to
    // free up, which costs far more than their stages (bench/NOTES.md
    // "v24", "v28"): such a plan only where no other fits.
    const std::pair cost{
        splits > 1 && waves > 1,
        waves * ceil_div(std::min(blocks, resident), p.sm_count) * per_split +
            (splits > 1 ? kClusterCostStages + splits : 0)};
    if (cost < best_cost) {
      best_cost = cost;
      best.splits = splits;
      best.stages_per_split = per_split;
      best.slab_pitch = pitch;
      // A half-type grid of one block a multiprocessor that fills nearly
      // all of them still takes half the shared memory where two blocks'
      // registers fit: the next grid's blocks (a dependent launch) then
      // start beside its last ones rather than after them (bench/NOTES.md
      // "v34"; float32's rings, some of them shallower, were not measured).
      const bool next_grid_beside =
          e == 2 && blocks <= p.sm_count && covers_gpu(blocks, p);
      best.ring_stages =
          static_cast<int>(next_grid_beside && rings_share ? half_ring : ring);
      best.smem_bytes =
          stream::smem_bytes(best.ring_stages, best.rows_per_block, pitch, e,
                             acc_size, best.x_in_ring, splits);
    }
  }
  if (best.splits == 0) return std::nullopt;
  best.next_grid_after_last_copy =
      e == 2 && best.stages_per_split <= kLateNextGridMaxStages;
  best.prefetch_stages = e == 4                           ? kPrefetchStagesFloat
                         : best.next_grid_after_last_copy ? kPrefetchStagesHalf
                                                          : 0;
  // Copies of several stages where the type and the block's rows take them
  // and they won: the weight splits into whole stages (its 3-D view,
  // encode_weight_map), the ring, cut to a multiple of them, still holds
  // two, and a block streams many stages. A multiple of the copy is one of
  // the groups too.
  const int copy = stream::copy_stages(e, best.rows_per_block);
  const int copy_ring = best.ring_stages - best.ring_stages % copy;
  if (copy > 1 && C % stage_c == 0 && copy_ring >= 2 * copy &&
      best.stages_per_split >= kMinCopyStagesPerBlock) {
    best.copy_stages = copy;
    best.ring_stages = copy_ring;
    best.smem_bytes =
        stream::smem_bytes(copy_ring, best.rows_per_block, best.slab_pitch, e,
                           acc_size, best.x_in_ring, best.splits);
  }
  return best;
}

bool can_run_wgmma(const Problem& p) {
  // The kernel counts rows, columns and tiles in 32-bit ints.
  const int64_t C = p.R * p.H;
  const bool tensor_core_type = p.element_size == 2 || p.element_size == 4;
  return p.wgmma_built && p.arch == kMeasuredArch && tensor_core_type &&
         p.x_tma_ok && p.weight_tma_ok && p.B > 0 && p.K > 0 && C > 0 &&
         p.B <= INT32_MAX - kWgmmaTileRows &&
         p.K <= INT32_MAX - kWgmmaTileCols && C <= INT32_MAX &&
         wgmma_tiles(p) <= INT32_MAX;
}

bool can_run_wgmma_pingpong(const Problem& p) {
  return can_run_wgmma(p) && p.element_size == 2;
}

bool can_run_wgmma_stationary(const Problem& p) {
  // Its blocks each keep one column tile: no more tiles than
  // multiprocessors across K.
  return can_run_wgmma_pingpong(p) &&
         wgmma_half_steps(p) <= kMaxWgmmaStationarySteps &&
         ceil_div(p.K, kWgmmaStationaryTileCols) <= p.sm_count;
}

bool can_run_wgmma_packed(const Problem& p) {
  const int64_t head_bytes = p.H * p.element_size;
  return can_run_wgmma(p) && (p.element_size == 2 || wgmma_three_products(p)) &&
         std::find(kWgmmaPackedHeadBytes.begin(), kWgmmaPackedHeadBytes.end(),
                   head_bytes) != kWgmmaPackedHeadBytes.end();
}

bool wgmma_stationary_asks_l2_first(int64_t resident, int64_t tiles,
                                    int sm_count) {
  return 2 * resident <= sm_count ||
         tiles >= kMinWgmmaStationaryL2FirstTiles * resident;
}

std::optional<WgmmaTailPlan> plan_wgmma_tail(const Problem& p) {
  if (!wgmma_three_products(p)) return std::nullopt;
  const int64_t tiles = wgmma_tiles(p);
  const int64_t steps = ceil_div(p.H, kWgmmaStepBytes / 4) * p.R;
  // The kernel counts a block's shares past its last tile by the grid.
  if (p.sm_count <= 0 || tiles > INT32_MAX - 2 * int64_t{p.sm_count} ||
      steps > INT32_MAX || steps < kMinWgmmaTailTileSteps) {
    return std::nullopt;
  }
  if (idle_percent(tiles, p.sm_count) < kMinWgmmaTailIdlePercent) {
    return std::nullopt;
  }
  const int blocks = static_cast<int>(std::min<int64_t>(tiles, p.sm_count));
  WgmmaTailPlan plan;
  plan.layout = tile_schedule::plan(tiles, static_cast<int>(steps), blocks,
                                    kMinWgmmaTailSteps);
  if (plan.layout.tail_tiles == 0) return std::nullopt;
  plan.workspace_bytes = tile_schedule::workspace_bytes(
      plan.layout, kWgmmaTileRows * kWgmmaSplitTileCols);
  return plan;
}

int wgmma_cluster_splits(int64_t tiles, int64_t steps,
                         const ResidentClusters& resident) {
  for (const int splits : kWgmmaClusterSplitSizes) {
    if (tiles <= resident[splits] && steps / splits >= kMinClusterSplitSteps) {
      return splits;
    }
  }
  // Pairs in more than one wave, where even they do not all fit at once.
  return steps / 2 >= kMinClusterSplitSteps ? 2 : 1;
}

bool can_run_wgmma_split(const Problem& p) {
  if (!can_run_wgmma_pingpong(p)) return false;
  const int64_t steps = wgmma_half_steps(p);
  return 2 * wgmma_split_tiles(p) <= p.sm_count &&
         steps / 2 >= kMinClusterSplitSteps;
}

namespace {

// The warp-dot kernel's plan where it loads 16-byte vectors, the instance
// its table's rows measured.
std::optional<WarpDotPlan> plan_warp_dot_vectors(const Problem& p) {
  auto plan = plan_warp_dot(p);
  if (plan && plan->vector_bytes != warp_dot::kVectorBytes) return std::nullopt;
  return plan;
}

}  // namespace

RouteChoice choose(const Problem& p) {
  const Route fallback =
      p.x_gathered_view ? Route::kCublasView : Route::kCublasCat;
  if (const auto forced = forced_route()) {
    if (*forced == Route::kStream) {
      if (auto plan = plan_stream(p)) return taking(*plan);
    } else if (*forced == Route::kWarpDot) {
      if (auto plan = plan_warp_dot(p)) return taking(*plan);
    } else if (*forced == Route::kWarpMma) {
      if (auto plan = plan_warp_mma(p)) return taking(*plan);
    } else if (*forced == Route::kWgmma) {
      if (can_run_wgmma(p)) return taking_wgmma(p);
    } else if (*forced == Route::kWgmmaPingpong) {
      if (can_run_wgmma_pingpong(p)) return taking(Route::kWgmmaPingpong);
    } else if (*forced == Route::kWgmmaSplit) {
      if (can_run_wgmma_split(p)) return taking(Route::kWgmmaSplit);
    } else if (*forced == Route::kWgmmaStationary) {
      if (can_run_wgmma_stationary(p)) {
        return taking(Route::kWgmmaStationary);
      }
    } else if (*forced == Route::kWgmmaPacked) {
      if (can_run_wgmma_packed(p)) return taking(Route::kWgmmaPacked);
    } else if (*forced != Route::kCublasView || p.x_gathered_view) {
      return taking(*forced);
    }
  }
  if (p.arch == kMeasuredArch && cublas_wins_half_decode(p)) {
    return taking(fallback);
  }
  if (p.arch == kMeasuredArch && wgmma_float_wins_over_row_tiles(p) &&
      can_run_wgmma(p)) {
    return taking_wgmma_by_table(p, fallback);
  }
  if (p.arch == kMeasuredArch && warp_dot_wins_long_contraction(p)) {
    if (auto plan = plan_warp_dot_vectors(p)) return taking(*plan);
  }
  if (p.arch == kMeasuredArch && warp_mma_wins(p)) {
    if (auto plan = plan_warp_mma(p)) return taking(*plan);
  }
  if (p.arch == kMeasuredArch && warp_dot_wins(p)) {
    if (auto plan = plan_warp_dot_vectors(p)) return taking(*plan);
  }
  if (auto plan = stream_plan_by_table(p)) {
    return stream_float_short_slabs_lose(p, *plan)
               ? taking_past_short_slabs(p, fallback)
               : taking(*plan);
  }
  // Where slower memory takes the split's margin, the reference's route,
  // not the next fused one: the table never measured those there.
  if (wgmma_split_wins(p) && can_run_wgmma_split(p)) {
    return taking(wgmma_split_margin_holds(p) ? Route::kWgmmaSplit : fallback);
  }
  if (wgmma_stationary_wins(p) && can_run_wgmma_stationary(p)) {
    return taking(Route::kWgmmaStationary);
  }
  if (wgmma_pingpong_wins(p) && can_run_wgmma_pingpong(p)) {
    return taking(Route::kWgmmaPingpong);
  }
  if (wgmma_wins(p) && can_run_wgmma(p)) {
    return taking_wgmma_by_table(p, fallback);
  }
  if (const auto route = wgmma_route_for_unaligned_out(p)) {
    return *route == Route::kWgmma ? taking_wgmma(p) : taking(*route);
  }
  if (p.arch == kMeasuredArch && small_problem_fused(p)) {
    if (narrow_warp_dot_wins(p)) {
      if (auto plan = plan_warp_dot(p)) return taking(*plan);
    }
    if (p.element_size == 4 && p.R * p.H < kShortContraction) {
      if (auto plan = plan_warp_mma(p)) return taking(*plan);
    }
    if (auto plan = plan_stream(p)) return taking(*plan);
  }
  return taking(fallback);
}

Route choose_route(const Problem& p) { return choose(p).route; }

void force_route(std::optional<Route> route) { g_forced_route.set(route); }

std::optional<Route> forced_route() { return g_forced_route.get(); }

}  // namespace fgl::cuda
