// Builds against the installed headers and library, and runs a graph.
#include <iron/iron.hpp>

int main() {
  struct Square : iron::Graph {
    iron::Input x = input("x");
    iron::Outputs body() override { return {x * x}; }
  } g;
  auto out = g.compile({{"x", {3}}})({iron::Tensor::from({1, 2, 3}, {3})}).outputs[0].to_floats();
  return out == std::vector<float>{1, 4, 9} ? 0 : 1;
}
