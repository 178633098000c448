# cuDNN frontend (header-only C++ graph API) and the cuDNN headers it needs.
#
# Provides the INTERFACE target ptxbench_cudnn_frontend and the variables
# PTXBENCH_CUDNN_FRONTEND_INCLUDE_DIR / PTXBENCH_CUDNN_FRONTEND_FOUND_VERSION.
#
# Headers: the pinned nvidia-cudnn-frontend wheel ships them under include/.
# At configure time we `pip download` that wheel into the build tree and unpack
# include/ only (nothing is committed). A machine without PyPI sets
# -DPTXBENCH_CUDNN_FRONTEND_INCLUDE=DIR, where DIR holds cudnn_frontend.h or is
# a folder whose include/ does (e.g. third_party/cudnn_frontend, which
# .gitignore keeps out of git and which the GPU machine receives as a carried copy).
#
# cuDNN itself is NOT linked: the frontend is compiled with
# NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING and evaluator/worker/cudnn_sdpa.cpp
# dlopen()s the newest libcudnn.so.9 it finds at run time (a machine may hold
# several cuDNN builds: system packages, the CUDA toolkit, Python wheels).
# Only cudnn.h (types, prototypes) is needed at build time.

set(_ptxb_fe_version "${PTXBENCH_CUDNN_FRONTEND_VERSION}")

function(_ptxb_resolve_frontend_dir candidate out_var)
  if(EXISTS "${candidate}/cudnn_frontend.h")
    set(${out_var} "${candidate}" PARENT_SCOPE)
  elseif(EXISTS "${candidate}/include/cudnn_frontend.h")
    set(${out_var} "${candidate}/include" PARENT_SCOPE)
  else()
    set(${out_var} "" PARENT_SCOPE)
  endif()
endfunction()

if(PTXBENCH_CUDNN_FRONTEND_INCLUDE)
  get_filename_component(_ptxb_fe_user "${PTXBENCH_CUDNN_FRONTEND_INCLUDE}" ABSOLUTE BASE_DIR "${PROJECT_SOURCE_DIR}")
  _ptxb_resolve_frontend_dir("${_ptxb_fe_user}" _ptxb_fe_dir)
  if(NOT _ptxb_fe_dir)
    message(FATAL_ERROR "PTXBENCH_CUDNN_FRONTEND_INCLUDE=${PTXBENCH_CUDNN_FRONTEND_INCLUDE}: neither it nor its "
                        "include/ holds cudnn_frontend.h. Unpack the include/ folder of the "
                        "nvidia-cudnn-frontend==${_ptxb_fe_version} wheel there.")
  endif()
else()
  set(_ptxb_fe_root "${CMAKE_BINARY_DIR}/_deps/cudnn_frontend-${_ptxb_fe_version}")
  if(NOT EXISTS "${_ptxb_fe_root}/include/cudnn_frontend.h")
    find_package(Python3 COMPONENTS Interpreter REQUIRED)
    message(STATUS "Downloading nvidia-cudnn-frontend==${_ptxb_fe_version} (headers only are kept)")
    file(REMOVE_RECURSE "${_ptxb_fe_root}")
    execute_process(
      COMMAND "${Python3_EXECUTABLE}" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check
              --quiet -d "${_ptxb_fe_root}/wheel" "nvidia-cudnn-frontend==${_ptxb_fe_version}"
      RESULT_VARIABLE _ptxb_pip_rc ERROR_VARIABLE _ptxb_pip_err TIMEOUT 300)
    file(GLOB _ptxb_fe_wheels "${_ptxb_fe_root}/wheel/nvidia_cudnn_frontend-${_ptxb_fe_version}-*.whl")
    if(NOT _ptxb_pip_rc EQUAL 0 OR NOT _ptxb_fe_wheels)
      message(FATAL_ERROR "Could not download the nvidia-cudnn-frontend==${_ptxb_fe_version} wheel "
                          "(pip: ${_ptxb_pip_rc} ${_ptxb_pip_err}). On a machine without PyPI, unpack the "
                          "wheel's include/ folder somewhere (e.g. third_party/cudnn_frontend/include) and "
                          "configure with -DPTXBENCH_CUDNN_FRONTEND_INCLUDE=<that folder>.")
    endif()
    list(GET _ptxb_fe_wheels 0 _ptxb_fe_wheel)
    file(ARCHIVE_EXTRACT INPUT "${_ptxb_fe_wheel}" DESTINATION "${_ptxb_fe_root}" PATTERNS "include/*")
    file(REMOVE_RECURSE "${_ptxb_fe_root}/wheel")
  endif()
  _ptxb_resolve_frontend_dir("${_ptxb_fe_root}" _ptxb_fe_dir)
  if(NOT _ptxb_fe_dir)
    message(FATAL_ERROR "The nvidia-cudnn-frontend==${_ptxb_fe_version} wheel holds no include/cudnn_frontend.h")
  endif()
endif()

# The version actually found (recorded in verdicts through CUDNN_FRONTEND_VERSION too).
file(STRINGS "${_ptxb_fe_dir}/cudnn_frontend_version.h" _ptxb_fe_lines
     REGEX "#define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION [0-9]+")
set(_ptxb_fe_found "")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "CUDNN_FRONTEND_${part}_VERSION ([0-9]+)" _m "${_ptxb_fe_lines}")
  list(APPEND _ptxb_fe_found "${CMAKE_MATCH_1}")
endforeach()
list(JOIN _ptxb_fe_found "." _ptxb_fe_found)
if(NOT _ptxb_fe_found STREQUAL _ptxb_fe_version)
  message(WARNING "cuDNN frontend headers in ${_ptxb_fe_dir} are version ${_ptxb_fe_found}, "
                  "not the pinned ${_ptxb_fe_version}")
endif()
set(PTXBENCH_CUDNN_FRONTEND_INCLUDE_DIR "${_ptxb_fe_dir}")
set(PTXBENCH_CUDNN_FRONTEND_FOUND_VERSION "${_ptxb_fe_found}")
message(STATUS "cuDNN frontend ${_ptxb_fe_found}: ${_ptxb_fe_dir}")

# cudnn.h: the CUDA toolkit's include dir first, then system and Python-wheel locations.
file(GLOB _ptxb_cudnn_wheel_includes "/opt/*/.venv/lib/python3*/site-packages/nvidia/cudnn/include"
     "/usr/local/lib/python3*/dist-packages/nvidia/cudnn/include")
find_path(PTXBENCH_CUDNN_INCLUDE_DIR cudnn.h
          HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/include/x86_64-linux-gnu ${_ptxb_cudnn_wheel_includes}
          DOC "Folder holding cudnn.h (cuDNN 9)")
if(NOT PTXBENCH_CUDNN_INCLUDE_DIR)
  message(FATAL_ERROR "cudnn.h not found: install cuDNN 9 headers or set -DPTXBENCH_CUDNN_INCLUDE_DIR=<folder>")
endif()
# The folder of the libcudnn.so.9 the build saw: one of the run-time candidates.
find_library(PTXBENCH_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn
             HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu DOC "libcudnn.so.9 seen at build time")
set(_ptxb_cudnn_build_libdir "")
if(PTXBENCH_CUDNN_LIBRARY)
  get_filename_component(_ptxb_cudnn_build_libdir "${PTXBENCH_CUDNN_LIBRARY}" DIRECTORY)
endif()

add_library(ptxbench_cudnn_frontend INTERFACE)
# SYSTEM: the frontend's own warnings are not ours to fix (-Werror).
target_include_directories(ptxbench_cudnn_frontend SYSTEM INTERFACE "${_ptxb_fe_dir}" "${PTXBENCH_CUDNN_INCLUDE_DIR}")
target_compile_definitions(ptxbench_cudnn_frontend INTERFACE
  NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING=1
  PTXBENCH_CUDNN_BUILD_LIBDIR="${_ptxb_cudnn_build_libdir}"
  PTXBENCH_CUDNN_FRONTEND_PINNED="${_ptxb_fe_version}")
target_link_libraries(ptxbench_cudnn_frontend INTERFACE ${CMAKE_DL_LIBS})
