#include "iron/handle.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "graph/recording.hpp"
#include "iron/error.hpp"

namespace iron {

Index range(int64_t start, int64_t stop, int64_t step) {
  if (step <= 0) value_error("range step must be positive, got " + std::to_string(step));
  Index i(Index::Kind::range);
  i.start = start;
  i.stop = stop;
  i.step = step;
  return i;
}

Index upto(const Affine& n) {
  Index i(Index::Kind::upto);
  i.value = n;
  return i;
}

Index at(const Affine& position) {
  Index i(Index::Kind::at);
  i.value = position;
  return i;
}

Index window(const Affine& start, int64_t length) {
  if (length < 0) value_error("a window of negative length " + std::to_string(length));
  Index i(Index::Kind::window);
  i.value = start;
  i.stop = length;
  return i;
}

AccessPattern AccessPattern::full(const Shape& shape) {
  return AccessPattern{0, shape, contiguous_strides(shape)};
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

Handle Handle::whole(std::shared_ptr<BufferNode> buffer) {
  Handle h;
  h.shape_ = buffer->shape;
  h.dtype_ = buffer->dtype;
  h.valid_.assign(h.shape_.size(), std::nullopt);
  h.strides_ = contiguous_strides(h.shape_);
  h.buffer_ = std::move(buffer);
  return h;
}

const std::string& Handle::name() const {
  static const std::string none = "<undefined>";
  return buffer_ ? buffer_->name : none;
}

int64_t Handle::dim(int axis) const {
  int r = rank();
  if (axis < -r || axis >= r)
    index_error("axis " + std::to_string(axis) + " is outside " + str());
  return shape_[size_t(axis < 0 ? axis + r : axis)];
}

const std::optional<Affine>& Handle::valid(int axis) const {
  int r = rank();
  if (axis < -r || axis >= r)
    index_error("axis " + std::to_string(axis) + " is outside " + str());
  return valid_[size_t(axis < 0 ? axis + r : axis)];
}

std::string Handle::str() const {
  std::ostringstream o;
  o << name() << to_string(shape_) << " " << iron::name(dtype_);
  for (size_t a = 0; a < valid_.size(); ++a)
    if (valid_[a]) o << " [axis " << a << " valid " << valid_[a]->str() << "]";
  if (layout_ == Layout::strided) o << " (strided view)";
  if (layout_ == Layout::gather) o << " (gathered rows)";
  return o.str();
}

Handle Handle::walked(Affine offset, Shape shape, Shape strides,
                      std::vector<std::optional<Affine>> valid) const {
  Handle h = *this;
  h.offset_ = std::move(offset);
  h.shape_ = std::move(shape);
  h.strides_ = std::move(strides);
  h.valid_ = std::move(valid);
  if (h.layout_ != Layout::gather)
    h.layout_ = h.strides_ == contiguous_strides(h.shape_) ? Layout::dense : Layout::strided;
  return h;
}

Handle Handle::operator[](const Index& index) const { return (*this)[{index}]; }

Handle Handle::operator[](std::initializer_list<Index> indices) const {
  if (!defined()) type_error("indexing an undefined handle");
  if (int(indices.size()) > rank())
    index_error(std::to_string(indices.size()) + " indices for " + str());
  if (layout_ == Layout::gather && indices.size() > 0 && indices.begin()->kind != Index::Kind::all &&
      indices.begin()->kind != Index::Kind::upto)
    value_error("cannot index the gathered axis of " + str() + "; index what it gathers from");
  Affine offset = offset_;
  Shape shape, strides;
  std::vector<std::optional<Affine>> valid;
  Recorder* recorder = Recorder::current();
  size_t axis = 0;
  for (const Index& index : indices) {
    int64_t size = shape_[axis], stride = strides_[axis];
    const std::string where = "axis " + std::to_string(axis) + " of " + str();
    switch (index.kind) {
      case Index::Kind::integer: {
        int64_t i = index.start < 0 ? index.start + size : index.start;
        if (i < 0 || i >= size) index_error("index " + std::to_string(index.start) + " is outside " + where);
        offset = offset + i * stride;
        break;
      }
      case Index::Kind::range: {
        int64_t begin = index.start < 0 ? index.start + size : index.start;
        int64_t end = index.stop < 0 ? index.stop + size : index.stop;
        begin = std::clamp<int64_t>(begin, 0, size);
        end = std::clamp<int64_t>(end, begin, size);
        offset = offset + begin * stride;
        shape.push_back((end - begin + index.step - 1) / index.step);
        strides.push_back(stride * index.step);
        std::optional<Affine> bound = valid_[axis];
        if (bound) bound = clamp(*bound - begin, 0, shape.back());
        valid.push_back(bound);
        break;
      }
      case Index::Kind::all:
        shape.push_back(size);
        strides.push_back(stride);
        valid.push_back(valid_[axis]);
        break;
      case Index::Kind::upto:
        if (index.value.is_constant()) {
          int64_t n = index.value.constant();
          if (n < 0 || n > size) index_error("bound " + std::to_string(n) + " is outside " + where);
        } else if (recorder) {
          recorder->limit(index.value, 0, size + 1, "bound " + index.value.str() + " of " + where);
        }
        shape.push_back(size);
        strides.push_back(stride);
        valid.push_back(index.value);
        break;
      case Index::Kind::window: {
        int64_t length = index.stop;
        if (length > size) index_error("a window of " + std::to_string(length) + " entries is longer than " + where);
        if (index.value.is_constant()) {
          int64_t i = index.value.constant();
          if (i < 0 || i + length > size) index_error("window at " + std::to_string(i) + " is outside " + where);
        } else if (recorder) {
          recorder->limit(index.value, 0, size - length + 1, "window start " + index.value.str() + " of " + where);
        } else {
          type_error("a per-call window records into a graph's body");
        }
        if (!offset.is_constant() && !index.value.is_constant())
          value_error("two per-call indices into one view of " + str() + "; index once and copy, then index the copy");
        offset = offset.is_constant() ? index.value * stride + offset.constant() : offset + index.value.constant() * stride;
        shape.push_back(length);
        strides.push_back(stride);
        valid.push_back(std::nullopt);
        break;
      }
      case Index::Kind::at:
        if (index.value.is_constant()) {
          int64_t i = index.value.constant();
          if (i < 0 || i >= size) index_error("index " + std::to_string(i) + " is outside " + where);
        } else if (recorder) {
          recorder->limit(index.value, 0, size, "index " + index.value.str() + " of " + where);
        } else {
          type_error("a per-call index records into a graph's body");
        }
        // offset + value * stride: both may be per call only if one is constant.
        if (!offset.is_constant() && !index.value.is_constant())
          value_error("two per-call indices into one view of " + str() +
                      "; index once and copy, then index the copy");
        offset = offset.is_constant() ? index.value * stride + offset.constant()
                                      : offset + index.value.constant() * stride;
        break;
    }
    ++axis;
  }
  for (; axis < shape_.size(); ++axis) {
    shape.push_back(shape_[axis]);
    strides.push_back(strides_[axis]);
    valid.push_back(valid_[axis]);
  }
  return walked(offset, shape, strides, valid);
}

Handle Handle::operator[](const Handle& ids) const {
  Recorder& recorder = Recorder::require("table[ids]");
  if (!ids.defined() || ids.rank() != 1 || ids.dtype() != i32)
    type_error("rows are gathered by a 1-D i32 handle, not " + ids.str());
  if (layout_ != Layout::dense || !offset_.is_constant())
    value_error("cannot gather rows of a view " + str() + "; gather from what it views");
  (void)recorder;
  Handle h = *this;
  h.layout_ = Layout::gather;
  h.ids_ = std::make_shared<const Handle>(dense(ids));
  h.shape_[0] = ids.dim(0);
  h.valid_[0] = ids.valid(0);
  return h;
}

Handle Handle::rows(const std::vector<int64_t>& ids) const {
  if (layout_ != Layout::dense || !offset_.is_constant())
    value_error("cannot gather rows of a view " + str() + "; gather from what it views");
  for (int64_t id : ids)
    if (id < 0 || id >= shape_[0])
      index_error("row " + std::to_string(id) + " is outside " + str());
  Handle h = *this;
  h.layout_ = Layout::gather;
  h.fixed_rows_ = ids;
  h.shape_[0] = int64_t(ids.size());
  h.valid_[0] = std::nullopt;
  return h;
}

Handle Handle::reshape(const Shape& shape) const {
  if (element_count(shape) != numel())
    value_error("cannot reshape " + str() + " to " + to_string(shape));
  if (layout_ != Layout::dense) value_error("cannot reshape a view " + str() + "; reshape what it views");
  // A bound on the leading axis carries over when rows stay whole (rows of the same width).
  std::vector<std::optional<Affine>> valid(shape.size());
  for (size_t a = 1; a < valid_.size(); ++a)
    if (valid_[a]) value_error("cannot reshape " + str() + ": an inner axis is bounded per call");
  if (!valid_.empty() && valid_[0] && !shape.empty()) {
    int64_t old_row = numel() / std::max<int64_t>(shape_[0], 1);
    int64_t new_row = element_count(shape) / std::max<int64_t>(shape[0], 1);
    if (old_row == new_row)
      valid[0] = valid_[0];
    else if (new_row % old_row == 0 || old_row % new_row == 0)
      valid[0] = new_row > old_row ? *valid_[0] / (new_row / old_row) : *valid_[0] * (old_row / new_row);
    else
      value_error("cannot reshape " + str() + " to " + to_string(shape) + ": its bound splits rows");
  }
  return walked(offset_, shape, contiguous_strides(shape), valid);
}

Handle Handle::transpose(const std::vector<int>& axes) const {
  if (layout_ != Layout::dense) value_error("cannot transpose a view " + str() + "; transpose what it views");
  std::vector<int> sorted(axes);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(shape_.size());
  std::iota(expected.begin(), expected.end(), 0);
  if (sorted != expected) {
    std::string list;
    for (int a : axes) list += (list.empty() ? "" : ", ") + std::to_string(a);
    value_error("axes (" + list + ") do not permute a shape of rank " + std::to_string(rank()));
  }
  Shape shape, strides;
  std::vector<std::optional<Affine>> valid;
  for (int a : axes) {
    shape.push_back(shape_[size_t(a)]);
    strides.push_back(strides_[size_t(a)]);
    valid.push_back(valid_[size_t(a)]);
  }
  return walked(offset_, shape, strides, valid);
}

Handle Handle::T() const {
  if (rank() != 2) value_error(".T of " + str() + ": a matrix has rank 2");
  return transpose({1, 0});
}

namespace {
// The strides that walk `from` (sizes and element strides) in the order of `shape`, when one
// exists: dimensions of size 1 dropped, runs of the walk that are contiguous among themselves
// merged and split again into the new shape's dimensions. None when the new shape would need a
// copy.
std::optional<Shape> restride(const Shape& sizes, const Shape& strides, const Shape& shape) {
  Shape os, ot;  // the walk without its unit dimensions
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) os.push_back(sizes[d]), ot.push_back(strides[d]);
  Shape out(shape.size(), 0);
  size_t oi = 0, ni = 0;
  while (oi < os.size() && ni < shape.size()) {
    if (shape[ni] == 1) {
      out[ni++] = 0;
      continue;
    }
    // Grow a group of old and new dimensions until their element counts agree.
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = os[oi], np = shape[ni];
    while (op != np) {
      if (op < np) {
        if (oj == os.size()) return std::nullopt;
        op *= os[oj++];
      } else {
        if (nj == shape.size()) return std::nullopt;
        np *= shape[nj++];
      }
    }
    // The old dimensions of a group must be one contiguous run of each other.
    for (size_t d = oi; d + 1 < oj; ++d)
      if (ot[d] != os[d + 1] * ot[d + 1]) return std::nullopt;
    int64_t stride = ot[oj - 1];
    for (size_t d = nj; d-- > ni;) {
      out[d] = stride;
      stride *= shape[d];
    }
    oi = oj;
    ni = nj;
  }
  for (; ni < shape.size(); ++ni) {
    if (shape[ni] != 1) return std::nullopt;
    out[ni] = 0;
  }
  if (oi != os.size()) return std::nullopt;
  // A unit dimension's stride does not matter; give it its contiguous value.
  for (size_t d = shape.size(); d-- > 0;)
    if (shape[d] == 1) out[d] = d + 1 < shape.size() ? out[d + 1] * shape[d + 1] : 1;
  return out;
}
}  // namespace

Handle Handle::at(const AccessPattern& pattern, const Shape& shape,
                  const std::vector<std::pair<int, Affine>>& bounds, const std::optional<Affine>& repeat,
                  const std::optional<Affine>& length) const {
  if (layout_ != Layout::dense || !offset_.is_constant())
    value_error("cannot walk a view " + str() + "; walk what it views");
  if (pattern.sizes.empty() || pattern.sizes.size() > 4 || pattern.sizes.size() != pattern.strides.size())
    value_error("an access pattern has 1 to 4 dimensions with a stride each");
  if (element_count(pattern.sizes) != element_count(shape))
    value_error("pattern " + to_string(pattern.sizes) + " cannot be seen as " + to_string(shape));
  // The furthest element the walk reaches must lie inside the buffer.
  int64_t last = offset_.constant() + pattern.offset;
  for (size_t d = 0; d < pattern.sizes.size(); ++d) {
    if (pattern.strides[d] < 0) value_error("access patterns walk forwards (stride >= 0)");
    if (pattern.sizes[d] < 1) value_error("access pattern sizes are at least 1, not " + to_string(pattern.sizes));
    last += (pattern.sizes[d] - 1) * pattern.strides[d];
  }
  int64_t buffer_elements = element_count(buffer_->shape);
  if (pattern.offset < 0 || last >= buffer_elements)
    index_error("pattern reaches element " + std::to_string(last) + " of " + name() + " with " +
                std::to_string(buffer_elements));
  std::optional<Shape> strides = restride(pattern.sizes, pattern.strides, shape);
  if (!strides)
    value_error("the walk " + to_string(pattern.sizes) + " by strides " + to_string(pattern.strides) +
                " cannot be seen as " + to_string(shape) + " without a copy");
  std::vector<std::optional<Affine>> valid(shape.size());
  Recorder* recorder = Recorder::current();
  auto bound = [&](int axis, const Affine& n, int64_t lowest, const std::string& what) {
    if (axis < 0 || axis >= int(shape.size())) index_error(what + " on axis " + std::to_string(axis) + " of " + to_string(shape));
    if (valid[size_t(axis)]) value_error(what + " on axis " + std::to_string(axis) + ": that axis is bounded already");
    if (!n.is_constant()) {
      if (recorder) recorder->limit(n, lowest, shape[size_t(axis)] + 1, what + " " + n.str() + " of axis " + std::to_string(axis));
    } else if (n.constant() < lowest || n.constant() > shape[size_t(axis)]) {
      index_error(what + " " + n.str() + " of axis " + std::to_string(axis) + " is outside [" + std::to_string(lowest) +
                  ", " + std::to_string(shape[size_t(axis)]) + "]");
    }
    valid[size_t(axis)] = n;
  };
  // A per-call repeat or length bounds a walk dimension; the view must keep it as its own axis.
  auto keeps = [&](size_t d, const char* what) {
    for (size_t a = 0; a <= d; ++a)
      if (a >= shape.size() || shape[a] != pattern.sizes[a])
        value_error(std::string("a per-call ") + what + " bounds dimension " + std::to_string(d) + " of the walk " +
                    to_string(pattern.sizes) + ": the view " + to_string(shape) + " must keep the walk's leading dimensions");
  };
  if (repeat) {
    keeps(0, "repeat");
    bound(0, *repeat, 1, "repeat");
  }
  if (length) {
    if (pattern.sizes.size() < 2) value_error("a per-call length takes entries of a walk's second dimension; this walk has one");
    keeps(1, "length");
    bound(1, *length, 1, "length");
  }
  for (const auto& [axis, n] : bounds) bound(axis, n, 0, "bound");
  return walked(offset_ + pattern.offset, shape, *strides, valid);
}

void Handle::assign(const Handle& source) const {
  Recorder& recorder = Recorder::require("assigning into a view");
  // Rows picked per call (cache[rows] = x) are a scatter: row i of the source goes to row
  // ids[i]. Fixed ids would be a constant scatter nothing needs yet.
  if (layout_ == Layout::gather && !ids_) value_error("cannot copy into rows gathered by fixed ids " + str());
  if (source.shape() != shape_)
    value_error("cannot copy " + source.str() + " into " + str() + ": shapes differ");
  if (buffer_->role == Role::weight) value_error("cannot write into weight " + str());
  Step step;
  step.op = recorder.make("Copy", {{"elements", numel()}});
  step.in = {source};
  step.out = {*this};
  recorder.add_step(std::move(step));
}

Handle Handle::bounded(int axis, const Affine& n) const {
  Handle h = *this;
  h.valid_.at(size_t(axis)) = n;
  return h;
}

Handle Handle::with_bounds(std::vector<std::optional<Affine>> valid) const {
  if (valid.size() != shape_.size()) value_error("bounds of another rank for " + str());
  Handle h = *this;
  h.valid_ = std::move(valid);
  return h;
}

}  // namespace iron
