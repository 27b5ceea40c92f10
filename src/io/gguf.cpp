#include "iron/io/gguf.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "io/tensor_view.hpp"
#include "iron/error.hpp"

namespace iron::io {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian numbers straight from the file");

namespace {

constexpr uint32_t kMaxRank = 4;   // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused

// The smallest encodings, used to bound counts by the bytes left before anything is allocated.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;  // key length, value type, a u8 value
constexpr uint64_t kMinTensorInfoBytes =
    8 + 4 + 8 + 4 + 8;  // name length, rank, 1 dim, type, offset

struct GgmlLayout {
  uint32_t id;
  const char* name;
  int block;  // elements per block
  int bytes;  // bytes per block
  std::optional<DType> dtype;
};

// ggml's type table (ids 4 and 5 were retired formats and are unknown here).
constexpr std::array<GgmlLayout, 32> kGgmlLayouts = {{
    {0, "F32", 1, 4, DType::f32},
    {1, "F16", 1, 2, DType::f16},
    {2, "Q4_0", 32, 18, DType::q4_0},
    {3, "Q4_1", 32, 20, DType::q4_1},
    {6, "Q5_0", 32, 22, DType::q5_0},
    {7, "Q5_1", 32, 24, DType::q5_1},
    {8, "Q8_0", 32, 34, DType::q8_0},
    {9, "Q8_1", 32, 36, {}},
    {10, "Q2_K", 256, 84, {}},
    {11, "Q3_K", 256, 110, {}},
    {12, "Q4_K", 256, 144, DType::q4_k},
    {13, "Q5_K", 256, 176, DType::q5_k},
    {14, "Q6_K", 256, 210, DType::q6_k},
    {15, "Q8_K", 256, 292, {}},
    {16, "IQ2_XXS", 256, 66, {}},
    {17, "IQ2_XS", 256, 74, {}},
    {18, "IQ3_XXS", 256, 98, {}},
    {19, "IQ1_S", 256, 50, {}},
    {20, "IQ4_NL", 32, 18, {}},
    {21, "IQ3_S", 256, 110, {}},
    {22, "IQ2_S", 256, 82, {}},
    {23, "IQ4_XS", 256, 136, {}},
    {24, "I8", 1, 1, DType::i8},
    {25, "I16", 1, 2, {}},
    {26, "I32", 1, 4, DType::i32},
    {27, "I64", 1, 8, {}},
    {28, "F64", 1, 8, {}},
    {29, "IQ1_M", 256, 56, {}},
    {30, "BF16", 1, 2, DType::bf16},
    {34, "TQ1_0", 256, 54, {}},
    {35, "TQ2_0", 256, 66, {}},
    {39, "MXFP4", 32, 17, {}},
}};

const GgmlLayout* find_layout(uint32_t id) {
  for (const GgmlLayout& layout : kGgmlLayouts)
    if (layout.id == id) return &layout;
  return nullptr;
}

constexpr std::array<std::string_view, 13> kTypeNames = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

// Bytes of one fixed-size value, or the least a string (its length) or an array (element type
// and count) can take; indexed by GgufType.
constexpr std::array<uint64_t, 13> kMinEncodedBytes = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};
uint64_t min_encoded_bytes(GgufType type) { return kMinEncodedBytes[size_t(type)]; }

bool is_integer(GgufType type) {
  return type != GgufType::f32 && type != GgufType::boolean && type != GgufType::string &&
         type != GgufType::array && type != GgufType::f64;
}

}  // namespace

std::string_view name(GgufType type) {
  auto index = size_t(type);
  return index < kTypeNames.size() ? kTypeNames[index] : "unknown";
}

std::string ggml_type_name(uint32_t ggml_type) {
  const GgmlLayout* layout = find_layout(ggml_type);
  return layout ? layout->name : "type " + std::to_string(ggml_type);
}

size_t GgufArray::size() const {
  return std::visit([](const auto& vector) { return vector.size(); }, items);
}

std::string GgufValue::type_name() const {
  if (const auto* array = std::get_if<GgufArray>(&value))
    return "array of " + std::string(name(array->element_type()));
  return std::string(name(type()));
}

// ---- parsing ---------------------------------------------------------------------------------

class GgufParser {
 public:
  explicit GgufParser(GgufFile& out)
      : out_(out), data_(out.file_->data()), size_(out.file_->size()) {}

  void run() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_tensor_data();
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    value_error(escaped_path(out_.file_->path()) + ": " + message);
  }
  uint64_t remaining() const { return size_ - pos_; }

  void need(uint64_t bytes, std::string_view what) const {
    if (bytes > remaining())
      fail("file is truncated: " + std::string(what) + " needs " + std::to_string(bytes) +
           " bytes at offset " + std::to_string(pos_) + " but the file ends at " +
           std::to_string(size_));
  }

  template <class T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(std::string_view what) {
    auto length = read<uint64_t>(what);
    need(length, what);  // before allocating: a length of 2^60 fails here
    std::string text(reinterpret_cast<const char*>(data_ + pos_), size_t(length));
    pos_ += length;
    return text;
  }

  GgufType read_type(std::string_view what) {
    auto id = read<uint32_t>(what);
    if (id >= kTypeNames.size())
      fail(std::string(what) + " has unknown value type " + std::to_string(id));
    return GgufType(id);
  }

  bool read_bool(std::string_view what) {
    auto byte = read<uint8_t>(what);
    if (byte > 1)
      fail(std::string(what) + " holds bool byte " + std::to_string(byte) + ", not 0 or 1");
    return byte == 1;
  }

  template <class T>
  std::vector<T> read_numbers(uint64_t count) {
    std::vector<T> values(
        static_cast<size_t>(count));  // count already checked against the bytes left
    if (count) std::memcpy(values.data(), data_ + pos_, size_t(count) * sizeof(T));
    pos_ += count * sizeof(T);
    return values;
  }

  GgufArray read_array(const std::string& what, int depth) {
    if (depth > kMaxArrayDepth)
      fail(what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth) + " levels");
    GgufType element = read_type(what + " (array element type)");
    auto count = read<uint64_t>(what + " (array length)");
    if (count > remaining() / min_encoded_bytes(element))
      fail(what + " claims " + std::to_string(count) + " " + std::string(name(element)) +
           " elements, more than the " + std::to_string(remaining()) + " bytes left can hold");
    GgufArray array;
    switch (element) {
      case GgufType::u8:
        array.items = read_numbers<uint8_t>(count);
        break;
      case GgufType::i8:
        array.items = read_numbers<int8_t>(count);
        break;
      case GgufType::u16:
        array.items = read_numbers<uint16_t>(count);
        break;
      case GgufType::i16:
        array.items = read_numbers<int16_t>(count);
        break;
      case GgufType::u32:
        array.items = read_numbers<uint32_t>(count);
        break;
      case GgufType::i32:
        array.items = read_numbers<int32_t>(count);
        break;
      case GgufType::f32:
        array.items = read_numbers<float>(count);
        break;
      case GgufType::u64:
        array.items = read_numbers<uint64_t>(count);
        break;
      case GgufType::i64:
        array.items = read_numbers<int64_t>(count);
        break;
      case GgufType::f64:
        array.items = read_numbers<double>(count);
        break;
      case GgufType::boolean: {
        std::vector<bool> values(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) values[i] = read_bool(what);
        array.items = std::move(values);
        break;
      }
      case GgufType::string: {
        std::vector<std::string> values(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) values[i] = read_string(what);
        array.items = std::move(values);
        break;
      }
      case GgufType::array: {
        std::vector<GgufArray> values(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) values[i] = read_array(what, depth + 1);
        array.items = std::move(values);
        break;
      }
    }
    return array;
  }

  GgufValue read_value(GgufType type, const std::string& what) {
    switch (type) {
      case GgufType::u8:
        return {read<uint8_t>(what)};
      case GgufType::i8:
        return {read<int8_t>(what)};
      case GgufType::u16:
        return {read<uint16_t>(what)};
      case GgufType::i16:
        return {read<int16_t>(what)};
      case GgufType::u32:
        return {read<uint32_t>(what)};
      case GgufType::i32:
        return {read<int32_t>(what)};
      case GgufType::f32:
        return {read<float>(what)};
      case GgufType::boolean:
        return {read_bool(what)};
      case GgufType::string:
        return {read_string(what)};
      case GgufType::array:
        return {read_array(what, 1)};
      case GgufType::u64:
        return {read<uint64_t>(what)};
      case GgufType::i64:
        return {read<int64_t>(what)};
      case GgufType::f64:
        return {read<double>(what)};
    }
    fail(what + " has unknown value type");
  }

  void read_header() {
    need(4, "the magic bytes");
    if (std::memcmp(data_, "GGUF", 4) != 0) fail("not a GGUF file (bad magic bytes)");
    pos_ = 4;
    auto version = read<uint32_t>("the version");
    if (version == 1) fail("GGUF version 1 is not supported (only versions 2 and 3)");
    if (version == 0x02000000u || version == 0x03000000u)
      fail("big-endian GGUF files are not supported");
    if (version != 2 && version != 3)
      fail("GGUF version " + std::to_string(version) + " is not supported (only versions 2 and 3)");
    out_.version_ = version;
    tensor_count_ = read<uint64_t>("the tensor count");
    kv_count_ = read<uint64_t>("the metadata count");
    if (kv_count_ > remaining() / kMinKeyValueBytes)
      fail("header claims " + std::to_string(kv_count_) + " metadata keys, more than the " +
           std::to_string(remaining()) + " bytes left can hold");
    if (tensor_count_ > remaining() / kMinTensorInfoBytes)
      fail("header claims " + std::to_string(tensor_count_) + " tensors, more than the " +
           std::to_string(remaining()) + " bytes left can hold");
  }

  void read_metadata() {
    out_.metadata_.reserve(size_t(kv_count_));
    for (uint64_t i = 0; i < kv_count_; ++i) {
      std::string key = read_string("metadata key " + std::to_string(i));
      if (out_.key_index_.count(key)) fail("metadata key '" + escaped(key) + "' appears twice");
      std::string what = "metadata key '" + escaped(key) + "'";
      GgufType type = read_type(what);
      GgufValue value = read_value(type, what);
      out_.key_index_.emplace(key, out_.metadata_.size());
      out_.metadata_.push_back({std::move(key), std::move(value)});
    }
  }

  void read_alignment() {
    std::optional<int64_t> alignment = out_.get_int("general.alignment");
    if (!alignment) return;
    if (*alignment <= 0 || *alignment > std::numeric_limits<uint32_t>::max() ||
        !std::has_single_bit(uint64_t(*alignment)))
      fail("general.alignment " + std::to_string(*alignment) + " is not a nonzero power of two");
    out_.alignment_ = uint32_t(*alignment);
  }

  void read_tensor_infos() {
    out_.tensors_.reserve(size_t(tensor_count_));
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      GgufTensorInfo tensor;
      tensor.name = read_string("the name of tensor " + std::to_string(i));
      if (out_.tensor_index_.count(tensor.name)) fail("tensor '" + escaped(tensor.name) + "' appears twice");
      std::string what = "tensor '" + escaped(tensor.name) + "'";
      auto rank = read<uint32_t>(what + " (rank)");
      if (rank < 1 || rank > kMaxRank)
        fail(what + " has rank " + std::to_string(rank) + " (must be 1 to 4)");
      int64_t numel = 1;
      for (uint32_t d = 0; d < rank; ++d) {
        auto dim = read<uint64_t>(what + " (dims)");
        if (dim < 1 || dim > uint64_t(std::numeric_limits<int64_t>::max()) ||
            int64_t(dim) > std::numeric_limits<int64_t>::max() / numel)
          fail(what + " has dimension " + std::to_string(d) + " = " + std::to_string(dim) +
               ", which is zero or makes the element count overflow");
        tensor.dims.push_back(int64_t(dim));
        numel *= int64_t(dim);
      }
      tensor.numel = numel;
      tensor.ggml_type = read<uint32_t>(what + " (type)");
      auto relative_offset = read<uint64_t>(what + " (offset)");
      if (relative_offset % out_.alignment_ != 0)
        fail(what + " data offset " + std::to_string(relative_offset) +
             " is not a multiple of the alignment " + std::to_string(out_.alignment_));
      if (const GgmlLayout* layout = find_layout(tensor.ggml_type)) {
        if (tensor.dims[0] % layout->block != 0)
          fail(what + " has ne0 = " + std::to_string(tensor.dims[0]) + ", not a multiple of the " +
               layout->name + " block size " + std::to_string(layout->block));
        int64_t blocks = numel / layout->block;
        if (blocks > std::numeric_limits<int64_t>::max() / layout->bytes)
          fail(what + " is too large: its byte size overflows");
        tensor.nbytes = blocks * layout->bytes;
        tensor.dtype = layout->dtype;
      }
      tensor.offset = relative_offset;  // made absolute once the data section is placed
      out_.tensor_index_.emplace(tensor.name, out_.tensors_.size());
      out_.tensors_.push_back(std::move(tensor));
    }
  }

  void place_tensor_data() {
    // pos_ <= size_, so rounding up cannot overflow 64 bits.
    uint64_t alignment = out_.alignment_;
    out_.data_offset_ = (pos_ + alignment - 1) / alignment * alignment;
    for (GgufTensorInfo& tensor : out_.tensors_) {
      uint64_t relative = tensor.offset;
      uint64_t size = tensor.nbytes < 0 ? 0 : uint64_t(tensor.nbytes);
      bool overflows = relative > std::numeric_limits<uint64_t>::max() - out_.data_offset_ - size;
      uint64_t begin = out_.data_offset_ + relative;
      if (overflows || begin + size > size_)
        fail("tensor '" + escaped(tensor.name) + "' data [" +
             (overflows ? std::to_string(out_.data_offset_) + " + " + std::to_string(relative)
                        : std::to_string(begin)) +
             ", " + (overflows ? "..." : std::to_string(begin + size)) +
             ") runs past the end of the file (size " + std::to_string(size_) + ")");
      tensor.offset = begin;
    }
  }

  GgufFile& out_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
};

GgufFile GgufFile::open(const std::string& path) { return parse(MappedFile::open(path)); }

GgufFile GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  if (!file) value_error("GgufFile::parse: no file");
  GgufFile out;
  out.file_ = std::move(file);
  GgufParser(out).run();
  return out;
}

// ---- metadata access -------------------------------------------------------------------------

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

void GgufFile::wrong_type(std::string_view key, const GgufValue& value,
                          std::string_view wanted) const {
  value_error(escaped_path(path()) + ": metadata key '" + escaped(key) + "' holds " + value.type_name() +
              ", not " + std::string(wanted));
}

namespace {

// Calls `fn(number)` for a value holding any integer type; returns false for other types.
template <class Fn>
bool visit_integer(const auto& storage, Fn&& fn) {
  return std::visit(
      [&](const auto& held) {
        using T = std::decay_t<decltype(held)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          fn(held);
          return true;
        } else {
          return false;
        }
      },
      storage);
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  int64_t result = 0;
  bool fits = true;
  bool integer = visit_integer(value->value, [&](auto number) {
    if constexpr (std::is_same_v<decltype(number), uint64_t>)
      fits = number <= uint64_t(std::numeric_limits<int64_t>::max());
    result = int64_t(number);
  });
  if (!integer) wrong_type(key, *value, "an integer");
  if (!fits)
    value_error(escaped_path(path()) + ": metadata key '" + escaped(key) + "' holds u64 " +
                std::to_string(std::get<uint64_t>(value->value)) + ", too large for int64");
  return result;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  if (const auto* f = std::get_if<float>(&value->value)) return double(*f);
  if (const auto* d = std::get_if<double>(&value->value)) return *d;
  double result = 0;
  if (!visit_integer(value->value, [&](auto number) { result = double(number); }))
    wrong_type(key, *value, "a number");
  return result;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  const auto* text = std::get_if<std::string>(&value->value);
  if (!text) wrong_type(key, *value, "string");
  return *text;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return std::nullopt;
  const auto* flag = std::get_if<bool>(&value->value);
  if (!flag) wrong_type(key, *value, "bool");
  return *flag;
}

std::vector<std::string> GgufFile::get_strings(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return {};
  const auto* array = std::get_if<GgufArray>(&value->value);
  const auto* strings = array ? std::get_if<std::vector<std::string>>(&array->items) : nullptr;
  if (!strings) wrong_type(key, *value, "array of string");
  return *strings;
}

std::vector<float> GgufFile::get_floats(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return {};
  const auto* array = std::get_if<GgufArray>(&value->value);
  if (array) {
    if (const auto* floats = std::get_if<std::vector<float>>(&array->items)) return *floats;
    if (const auto* doubles = std::get_if<std::vector<double>>(&array->items))
      return std::vector<float>(doubles->begin(), doubles->end());
  }
  wrong_type(key, *value, "array of f32");
}

std::vector<int32_t> GgufFile::get_ints(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) return {};
  const auto* array = std::get_if<GgufArray>(&value->value);
  if (!array || !is_integer(array->element_type())) wrong_type(key, *value, "array of integers");
  if (const auto* ints = std::get_if<std::vector<int32_t>>(&array->items)) return *ints;
  std::vector<int32_t> result;
  result.reserve(array->size());
  std::visit(
      [&](const auto& items) {
        using T = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          for (T item : items) {
            if (!std::in_range<int32_t>(item))
              value_error(escaped_path(path()) + ": metadata key '" + escaped(key) + "' element " +
                          std::to_string(result.size()) + " = " + std::to_string(item) +
                          " does not fit in int32");
            result.push_back(int32_t(item));
          }
        }
      },
      array->items);
  return result;
}

// ---- tensors ---------------------------------------------------------------------------------

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Tensor GgufFile::tensor(std::string_view name) const {
  const GgufTensorInfo* tensor = find_tensor(name);
  if (!tensor) index_error(escaped_path(path()) + ": no tensor named '" + escaped(name) + "'");
  if (!tensor->dtype)
    value_error(escaped_path(path()) + ": tensor '" + escaped(tensor->name) + "' has ggml type " +
                ggml_type_name(tensor->ggml_type) + " (id " + std::to_string(tensor->ggml_type) +
                "), which IRON cannot load");
  return detail::view_or_copy(file_->data() + tensor->offset, tensor->shape(), *tensor->dtype,
                              file_);
}

}  // namespace iron::io
