// tally/sketch/common/item_codec.hpp: the customisation point through which
// the summaries that store items (TopK, Reservoir, WeightedReservoir) write
// a user's own item type. The wire layout of every item kind is described in
// detail/item_codec.hpp.
#pragma once

#include "../../detail/abi.hpp"

TALLY_BEGIN_NAMESPACE

/// Customisation point: specialise ItemCodec<T> to make a sampler or TopK of
/// your own type serialisable. Write every field little-endian with the
/// ByteWriter methods; read() gets the same ByteReader back and must throw
/// tally::FormatError (format_check) for bytes that are not a valid T.
///
///     template <> struct tally::ItemCodec<Point> {
///         static constexpr std::uint8_t wire_size = 8;
///         static void write(tally::ByteWriter& w, const Point& p) { w.u32(p.x); w.u32(p.y); }
///         static Point read(tally::ByteReader& r) { return {r.u32(), r.u32()}; }
///     };
template <class T>
struct ItemCodec;

TALLY_END_NAMESPACE
