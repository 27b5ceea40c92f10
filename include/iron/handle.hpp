// Handles: what a graph's body() reads and writes. A handle is a recorded tensor: a place in a
// graph buffer, a shape, a dtype, a per-axis bound valid this call, and a layout (dense, strided
// or gathered rows). Calling operators on handles records steps; nothing is computed.
#pragma once

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "iron/dtype.hpp"
#include "iron/tensor.hpp"
#include "iron/value.hpp"

namespace iron {

struct BufferNode;  // a graph buffer (src/graph/recording.hpp)

enum class Layout : uint8_t {
  dense,    // contiguous from an offset (a static or per-call one)
  strided,  // any walk of element strides from an offset
  gather,   // leading-axis rows picked by fixed or per-call ids
};

/// One axis of an index: an integer, a static range, all of it, a per-call bound (`upto(n)`: the
/// leading `n` entries are valid this call), or a per-call index (`at(pos)`).
struct Index {
  enum class Kind : uint8_t { integer, range, all, upto, at, window };
  Kind kind = Kind::all;
  int64_t start = 0, stop = 0, step = 1;
  Affine value;

  Index(int64_t i) : kind(Kind::integer), start(i) {}  // NOLINT: h[3]
  Index(int i) : kind(Kind::integer), start(i) {}      // NOLINT
  Index(Kind k) : kind(k) {}                           // NOLINT
};
inline const Index all{Index::Kind::all};
/// Entries [start, stop) by `step`; a negative start or stop counts from the end.
Index range(int64_t start, int64_t stop, int64_t step = 1);
/// The leading `n` entries are valid this call (x[:n] with n per call).
Index upto(const Affine& n);
/// The entry at a per-call index (keys[:, pos]).
Index at(const Affine& position);
/// `length` entries from a per-call start (cache[start : start + length]).
Index window(const Affine& start, int64_t length);

/// A walk of up to four dimensions over a buffer: offset, then sizes and element strides.
struct AccessPattern {
  int64_t offset = 0;
  Shape sizes;
  Shape strides;
  /// Every element of `shape`, row-major.
  static AccessPattern full(const Shape& shape);
};

class Handle {
 public:
  Handle() = default;

  bool defined() const { return buffer_ != nullptr; }
  explicit operator bool() const { return defined(); }
  const Shape& shape() const { return shape_; }
  int rank() const { return int(shape_.size()); }
  int64_t dim(int axis) const;
  int64_t numel() const { return element_count(shape_); }
  DType dtype() const { return dtype_; }
  const std::string& name() const;
  Layout layout() const { return layout_; }
  /// The per-call bound on `axis`, if any.
  const std::optional<Affine>& valid(int axis) const;
  const std::vector<std::optional<Affine>>& bounds() const { return valid_; }
  std::string str() const;

  /// numpy's basic indexing, one index per leading axis.
  Handle operator[](const Index& index) const;
  Handle operator[](std::initializer_list<Index> indices) const;
  /// Leading-axis rows picked per call by a 1-D integer handle (table[ids]).
  Handle operator[](const Handle& ids) const;
  /// Leading-axis rows picked by fixed ids.
  Handle rows(const std::vector<int64_t>& ids) const;

  /// The same buffer seen with another shape (no data moves).
  Handle reshape(const Shape& shape) const;
  /// The same buffer walked with its axes permuted (no data moves).
  Handle transpose(const std::vector<int>& axes) const;
  /// transpose({1, 0}), as numpy's .T of a matrix.
  Handle T() const;
  /// What `pattern` walks, seen as `shape` (a slice when contiguous, else a strided view); the
  /// walk is seen as another shape where that needs no copy (merging or splitting its
  /// dimensions, as numpy's reshape of a view). `bounds` gives per-call bounds on the view's
  /// axes. Per call, `repeat` runs the walk's first dimension that many times (1 to its size)
  /// and `length` takes that many entries of its second: a cache read whose length grows with
  /// the position, with no copy. Both keep the walk's leading dimensions as the view's.
  Handle at(const AccessPattern& pattern, const Shape& shape,
            const std::vector<std::pair<int, Affine>>& bounds = {},
            const std::optional<Affine>& repeat = {}, const std::optional<Affine>& length = {}) const;
  /// Records a copy of `source` into this view (numpy's `view[...] = source`).
  void assign(const Handle& source) const;

  // ---- for the graph layer: how this handle walks its buffer ----
  const std::shared_ptr<BufferNode>& buffer() const { return buffer_; }
  const Affine& offset() const { return offset_; }
  /// Element strides of each axis (every layout; rows of a gather are walked by strides_[0]).
  const Shape& strides() const { return strides_; }
  const std::shared_ptr<const Handle>& ids() const { return ids_; }
  const std::vector<int64_t>& fixed_rows() const { return fixed_rows_; }
  /// A handle of a whole buffer.
  static Handle whole(std::shared_ptr<BufferNode> buffer);
  /// The same handle with a per-call bound on `axis`.
  Handle bounded(int axis, const Affine& n) const;
  Handle with_bounds(std::vector<std::optional<Affine>> valid) const;

 private:
  Handle walked(Affine offset, Shape shape, Shape strides,
                std::vector<std::optional<Affine>> valid) const;

  std::shared_ptr<BufferNode> buffer_;
  Shape shape_;
  DType dtype_ = f32;
  std::vector<std::optional<Affine>> valid_;
  Layout layout_ = Layout::dense;
  Affine offset_;
  Shape strides_;
  std::shared_ptr<const Handle> ids_;
  std::vector<int64_t> fixed_rows_;
};

/// Row-major element strides of `shape`.
Shape contiguous_strides(const Shape& shape);

// Elementwise steps (a broadcast row allowed on the right) and `@` of one row.
Handle operator+(const Handle& a, const Handle& b);
Handle operator-(const Handle& a, const Handle& b);
Handle operator*(const Handle& a, const Handle& b);
Handle operator/(const Handle& a, const Handle& b);
/// One row times a matrix: (k,) or (1, k) @ (k, n).
Handle matmul(const Handle& row, const Handle& matrix);

}  // namespace iron
