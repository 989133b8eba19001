from models.ctc import CTC
from models.seq2seq import Seq2Seq
from models.transducer import Transducer
