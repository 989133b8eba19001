# the folders of src/ are put on PYTHONPATH by path.sh
